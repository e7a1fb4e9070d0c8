package executortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/toolscope/toolscope/internal/testutil"
)

// GitImage is the image of the docker and remote workspace cases: agentctl
// runs git where it runs. It is GitRootfs imported into the engine, where
// it stays as this machine's cache.
const GitImage = "toolscope-test-git:1"

// gitRootfsName is GitRootfs's file in the machine's toolscope cache
// directory: Debian's minimal root file system with git and
// ca-certificates, made by mmdebstrap (Debian's packages are reachable,
// an image registry is not). The name changes with what it holds.
const (
	gitRootfsSuite = "bookworm"
	gitRootfsName  = "test-git-rootfs-" + gitRootfsSuite + "-1.tar"
)

// errNoMmdebstrap: this machine cannot make GitRootfs.
var errNoMmdebstrap = errors.New("mmdebstrap is needed")

var (
	gitRootfsOnce sync.Once
	gitRootfsPath string
	gitRootfsErr  error

	gitImageOnce sync.Once
	gitImageErr  error
)

// GitRootfs returns the path of a root file system (a tar) with git, for
// the images of the workspace cases (docker's GitImage, the kubernetes
// test cluster's). It is made once per machine (about a minute) and kept
// in ~/.cache/toolscope, like the Kubernetes binaries; test processes of
// several packages asking at once wait for the one that makes it.
func GitRootfs(t testing.TB) string {
	t.Helper()
	gitRootfsOnce.Do(func() {
		var unlock func()
		if unlock, gitRootfsErr = cacheLock(); gitRootfsErr == nil {
			defer unlock()
			gitRootfsPath, gitRootfsErr = makeGitRootfs()
		}
	})
	if errors.Is(gitRootfsErr, errNoMmdebstrap) {
		testutil.SkipOrFailUnderCI(t, "%v", gitRootfsErr)
	}
	if gitRootfsErr != nil {
		t.Fatalf("the root file system with git: %v", gitRootfsErr)
	}
	return gitRootfsPath
}

// cacheDir is the machine's toolscope cache directory.
func cacheDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "toolscope")
	return dir, os.MkdirAll(dir, 0o755)
}

// cacheLock holds the cache's images lock (across processes) until the
// returned function is called.
func cacheLock() (func(), error) {
	dir, err := cacheDir()
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "test-images.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, err
	}
	return func() { lock.Close() }, nil
}

func makeGitRootfs() (string, error) {
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, gitRootfsName)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("%w to make %s, the workspace tests' root file system (apt-get install mmdebstrap; .ci/run installs it): %v", errNoMmdebstrap, path, err)
	}
	tmp := path + ".new"
	defer os.Remove(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mmdebstrap", "--quiet", "--variant=minbase", "--include=git,ca-certificates",
		"--format=tar", gitRootfsSuite, tmp).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mmdebstrap %s: %v: %s", gitRootfsSuite, err, strings.TrimSpace(string(out)))
	}
	return path, os.Rename(tmp, path)
}

// BuildGitImage returns GitImage, imported from GitRootfs unless the
// engine has it.
func BuildGitImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, GitImage); err == nil {
		return GitImage
	}
	rootfs := GitRootfs(t) // outside the once: it may skip the test
	gitImageOnce.Do(func() {
		var f *os.File
		if f, gitImageErr = os.Open(rootfs); gitImageErr != nil {
			return
		}
		defer f.Close()
		resp, err := cli.ImageImport(ctx, image.ImportSource{Source: f, SourceName: "-"}, GitImage,
			image.ImportOptions{Changes: []string{"LABEL " + testutil.LabelTest + "=image", `CMD ["/bin/sh"]`,
				"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
		if gitImageErr = err; err == nil {
			gitImageErr = readProgress(resp)
		}
	})
	if gitImageErr != nil {
		t.Fatalf("import %s: %v", GitImage, gitImageErr)
	}
	return GitImage
}

// readProgress reads an engine's JSON progress stream to its end and
// returns the error it reports, if any.
func readProgress(body io.ReadCloser) error {
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if strings.TrimSpace(msg.Error) != "" {
			return errors.New(msg.Error)
		}
	}
}
