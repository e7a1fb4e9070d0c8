package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/toolscope/toolscope/executors/executortest"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/pki"
)

// newTask creates a workspace, a github repository and a task on it.
func newTask(t *testing.T, srv *orchestrator) string {
	t.Helper()
	ws := srv.id(t, "workspace", "workspace", "create", "acme")
	gh := srv.id(t, "repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/api")
	return srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", gh)
}

// TestRemoteExecutorWithGeneratedCertificates: `toolscope certs` creates
// the CA and certificates, an agentctl daemon runs with them, and the
// orchestrator launches a session there over mutual TLS.
func TestRemoteExecutorWithGeneratedCertificates(t *testing.T) {
	t.Parallel()
	agentctl := executortest.Agentctl(t)
	certs := filepath.Join(t.TempDir(), "certs")
	srv := startServer(t, t.TempDir(), "--agentctl", agentctl) // only to run the certs commands through the binary
	srv.ok(t, "certs", "init", "--dir", certs)
	srv.ok(t, "certs", "server", "--dir", certs, "--host", "127.0.0.1")

	port := freePort(t)
	startRemoteDaemon(t, agentctl, certs, port)
	orchDir := t.TempDir()
	orch := startServer(t, orchDir, remoteFlags(agentctl, certs, port)...)
	task := newTask(t, orch)
	r := orch.run(t, "--json", "session", "launch", task, "--executor", "remote")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "mutual TLS")
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "running", s["state"])
	assert.Equal(t, map[string]any{"providers": []any{"github"}, "generation": float64(1)}, s["pushed_provider_set"])
	assert.Contains(t, orch.ok(t, "--json", "session", "stop", s["id"].(string)), "stopped")

	// An API caller's certificate from the same CA ('certs client', as the
	// operations guide makes both in one directory) is not the
	// orchestrator's: the daemon refuses it every RPC.
	srv.ok(t, "certs", "client", "--dir", certs, "--name", "alice", "--role", "admin")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(certs, name))
		require.NoError(t, err)
		return b
	}
	cfg, err := pki.ClientConfig(pki.Pair{CertPEM: read("client-alice.crt"), KeyPEM: read("client-alice.key")}, read("ca.crt"))
	require.NoError(t, err)
	conn, err := grpc.NewClient("127.0.0.1:"+port, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	defer conn.Close()
	_, err = agentctlv1.NewAgentctlServiceClient(conn).GetSessionState(context.Background(), &agentctlv1.GetSessionStateRequest{SessionId: s["id"].(string)})
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, `client certificate "alice"`)
	assert.ErrorContains(t, err, "is not the orchestrator's")

	// A new orchestrator certificate from the same CA, for when the first
	// nears its end: the host takes it with nothing new on its side.
	before := read("orchestrator.crt")
	srv.ok(t, "certs", "orchestrator", "--dir", certs)
	assert.NotEqual(t, before, read("orchestrator.crt"))
	orch.stop(t)
	orch = startServer(t, orchDir, remoteFlags(agentctl, certs, port)...)
	r = orch.run(t, "--json", "session", "launch", task, "--executor", "remote")
	require.Equal(t, 0, r.code, "with the new certificate: %s", r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "running", s["state"])
	assert.Contains(t, orch.ok(t, "--json", "session", "stop", s["id"].(string)), "stopped")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startRemoteDaemon runs `agentctl serve` as a remote host would, under
// mutual TLS with the certificates `toolscope certs` made in dir, and
// returns it once it is ready; it is killed when the test ends.
func startRemoteDaemon(t *testing.T, agentctl, certs, port string) *exec.Cmd {
	t.Helper()
	daemon := exec.Command(agentctl, "serve", "--listen", "127.0.0.1:"+port,
		"--tls-cert", filepath.Join(certs, "agentctl-127.0.0.1.crt"), "--tls-key", filepath.Join(certs, "agentctl-127.0.0.1.key"),
		"--client-ca", filepath.Join(certs, "ca.crt"), "--state-dir", t.TempDir())
	stdout, err := daemon.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, daemon.Start())
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	ready := make(chan string, 1)
	go func() { line, _ := bufio.NewReader(stdout).ReadString('\n'); ready <- line }()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatal("the remote agentctl did not get ready")
	}
	return daemon
}

// remoteFlags are the serve flags for a remote host made by
// startRemoteDaemon.
func remoteFlags(agentctl, certs, port string) []string {
	return []string{"--agentctl", agentctl, "--remote-addr", "127.0.0.1:" + port,
		"--remote-cert", filepath.Join(certs, "orchestrator.crt"), "--remote-key", filepath.Join(certs, "orchestrator.key"),
		"--remote-ca", filepath.Join(certs, "ca.crt")}
}

// TestDockerExecutorThroughTheCLI launches a session in a container of the
// test image; progress names each step.
func TestDockerExecutorThroughTheCLI(t *testing.T) {
	t.Parallel()
	cli := executortest.RequireDocker(t)
	image := executortest.BuildTestImage(t, cli)
	agentctl := executortest.Agentctl(t)
	srv := startServer(t, t.TempDir(), "--agentctl", agentctl)
	task := newTask(t, srv)
	r := srv.run(t, "--json", "session", "launch", task, "--executor", "docker", "--image", image)
	require.Equal(t, 0, r.code, r.stderr)
	for _, step := range []string{"checking image", "creating container", "starting container", "waiting for agentctl", "applied providers github"} {
		assert.Contains(t, r.stderr, step)
	}
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	assert.Equal(t, "running", s["state"])
	id := s["id"].(string)
	assert.Equal(t, "running", srv.session(t, id)["state"])
	assert.Contains(t, srv.ok(t, "--json", "session", "stop", id), "stopped")

	r = srv.run(t, "session", "launch", task, "--executor", "docker", "--image", "toolscope-no-such-image:0")
	assert.Equal(t, 5, r.code, "a missing image is a failed precondition: %s", r.stderr)
	assert.Contains(t, r.stderr, "toolscope-no-such-image:0")
}
