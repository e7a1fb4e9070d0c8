package executortest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Agentctl builds the static agentctl binary once per test process (in the
// go.work workspace, from source) and returns its path.
func Agentctl(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "toolscope-agentctl-"); buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "agentctl")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildPath, "github.com/toolscope/toolscope/agentctl/cmd/agentctl")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build agentctl: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// RemoveBuilds deletes what Agentctl built; call it from TestMain.
func RemoveBuilds() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
