package executortest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// RequireDocker returns a client of a Docker engine that answers. Without
// one it skips the test loudly — except under CI, where it fails: CI
// always starts an engine, so nothing may be skipped there.
func RequireDocker(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Docker engine answers (%v): CI must run the docker tests (.ci/run starts dockerd)", err)
		}
		t.Skipf("SKIPPED LOUDLY: no Docker engine answers (%v); start dockerd to run the docker tests", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

var (
	imageOnce sync.Once
	imageErr  error
)

// TestImage is the image the docker tests run: FROM scratch, with nothing
// but a marker file. agentctl is bind-mounted into it, and no registry is
// needed.
const TestImage = "toolscope-test-scratch:1"

// BuildTestImage builds TestImage once per test process.
func BuildTestImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	imageOnce.Do(func() {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for name, body := range map[string]string{
			"Dockerfile": "FROM scratch\nCOPY marker /marker\n",
			"marker":     "toolscope test image\n",
		} {
			_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
			_, _ = tw.Write([]byte(body))
		}
		_ = tw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{TestImage}, Remove: true, Version: build.BuilderV1})
		if err != nil {
			imageErr = err
			return
		}
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var msg struct {
				Error string `json:"error"`
			}
			if err := dec.Decode(&msg); err == io.EOF {
				return
			} else if err != nil {
				imageErr = err
				return
			}
			if msg.Error != "" {
				imageErr = io.ErrUnexpectedEOF
				if strings.TrimSpace(msg.Error) != "" {
					imageErr = &buildError{msg.Error}
				}
				return
			}
		}
	})
	if imageErr != nil {
		t.Fatalf("build the test image: %v", imageErr)
	}
	return TestImage
}

type buildError struct{ msg string }

func (e *buildError) Error() string { return e.msg }
