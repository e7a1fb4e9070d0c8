package executortest

import (
	"archive/tar"
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/toolscope/toolscope/internal/testutil"
)

// RequireDocker returns a client of a Docker engine that answers. Without
// one it skips the test loudly — except under CI, where it fails: CI
// always starts an engine, so nothing may be skipped there.
func RequireDocker(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = cli.Ping(ctx)
	}
	if err != nil {
		testutil.SkipOrFailUnderCI(t, "no Docker engine answers (%v); start dockerd to run the docker tests (.ci/run starts it)", err)
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
		imageErr = buildImage(cli, TestImage, map[string]file{
			"Dockerfile": {"FROM scratch\nCOPY marker /marker\n", 0o644},
			"marker":     {"toolscope test image\n", 0o644},
		})
	})
	if imageErr != nil {
		t.Fatalf("build the test image: %v", imageErr)
	}
	return TestImage
}

// ProbeImage is TestImage with the probe agent (package probe) at
// /probe, for RunIsolation.
const ProbeImage = "toolscope-test-probe:1"

var (
	probeImageOnce sync.Once
	probeImageErr  error
)

// BuildProbeImage builds ProbeImage once per test process.
func BuildProbeImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	probeImageOnce.Do(func() {
		var bin []byte
		if bin, probeImageErr = os.ReadFile(Probe(t)); probeImageErr != nil {
			return
		}
		probeImageErr = buildImage(cli, ProbeImage, map[string]file{
			"Dockerfile": {"FROM scratch\nCOPY probe /probe\n", 0o644},
			"probe":      {string(bin), 0o755},
		})
	})
	if probeImageErr != nil {
		t.Fatalf("build the probe image: %v", probeImageErr)
	}
	return ProbeImage
}

type file struct {
	body string
	mode int64
}

// buildImage builds tag from the files of a build context.
func buildImage(cli *client.Client, tag string, files map[string]file) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, f := range files {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: f.mode, Size: int64(len(f.body))})
		_, _ = tw.Write([]byte(f.body))
	}
	_ = tw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, Version: build.BuilderV1,
		Labels: map[string]string{testutil.LabelTest: "image"}})
	if err != nil {
		return err
	}
	return readProgress(resp.Body)
}

// BridgeGateway is this machine's address on the engine's default bridge
// network: where a container reaches a server the test starts (listening
// on that address alone, not on every interface).
func BridgeGateway(t testing.TB, cli *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := cli.NetworkInspect(ctx, "bridge", network.InspectOptions{})
	if err != nil {
		t.Fatalf("inspect the engine's bridge network: %v", err)
	}
	for _, c := range n.IPAM.Config {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway
		}
	}
	t.Fatalf("the engine's bridge network has no IPv4 gateway: %+v", n.IPAM.Config)
	return ""
}
