package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
)

// listeningSockets counts the TCP sockets pid listens on (IPv4 and IPv6).
func listeningSockets(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	inodes := map[string]bool{}
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] { // 0A: LISTEN
				n++
			}
		}
		require.NoError(t, f.Close())
	}
	return n
}

// scrapeText reads url's exposition text.
func scrapeText(t *testing.T, url string) string {
	t.Helper()
	return string(testutil.GetOK(t, url))
}

// TestMetricsAreOptInAndCountListChanged: without --metrics-addr agentctl
// listens on its gRPC address only; with it, /metrics counts each
// list_changed sent (none for a stale push) and the sessions hosted, and
// names no session.
func TestMetricsAreOptInAndCountListChanged(t *testing.T) {
	t.Parallel()
	plain := startDaemon(t)
	assert.Empty(t, plain.ready.Metrics)
	assert.Equal(t, 1, listeningSockets(t, plain.cmd.Process.Pid), "gRPC only: no metrics listener by default")

	d := startDaemon(t, "--metrics-addr", "127.0.0.1:0")
	require.True(t, strings.HasPrefix(d.ready.Metrics, "http://127.0.0.1:"), d.ready.Metrics)
	assert.Contains(t, scrapeText(t, d.ready.Metrics), "toolscope_agentctl_sessions 0\n")

	const sessionID, taskID = "sess_metricsabcdef", "task_metricsabcdef"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := d.client.CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: &agentctlv1.LaunchSpec{
		SessionId: sessionID, TaskId: taskID, ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github"}, Generation: 1},
	}})
	require.NoError(t, err)
	var cfg struct{ Token string }
	raw, err := os.ReadFile(filepath.Join(d.state, "sessions", sessionID, "bridge.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &cfg))
	c := mcptest.Connect(t, mcptest.HTTP(created.GetStatus().GetMcpUrl(), cfg.Token), "")
	c.Names(t)
	push := func(gen uint64, set ...string) {
		_, err := d.client.ApplySurface(ctx, &agentctlv1.ApplySurfaceRequest{SessionId: sessionID, Surface: &agentctlv1.Surface{
			ProviderSet: &agentctlv1.ProviderSet{Providers: set, Generation: gen}}})
		require.NoError(t, err)
	}
	push(2, "github", "gitlab")
	c.WaitChanged(t)
	push(1, "gitlab") // stale: no change, no notification
	c.ExpectNone(t, "a stale push")

	text := scrapeText(t, d.ready.Metrics)
	assert.Contains(t, text, "toolscope_agentctl_list_changed_sent_total 1\n")
	assert.Contains(t, text, "toolscope_agentctl_sessions 1\n")
	assert.Contains(t, text, "go_goroutines ")
	assert.NotContains(t, text, sessionID)
	assert.NotContains(t, text, taskID)
	assert.NotContains(t, text, cfg.Token)
}

// TestMetricsAddressIsLoopbackOnly: agentctl's metrics carry no
// credential, so a non-loopback address is a usage error.
func TestMetricsAddressIsLoopbackOnly(t *testing.T) {
	t.Setenv(daemon.EnvSecret, "test-secret")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--state-dir", t.TempDir(), "--metrics-addr", "0.0.0.0:0"}, nil, &out, &errOut)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut.String(), "--metrics-addr")
	assert.Contains(t, errOut.String(), "loopback")
	assert.Empty(t, out.String(), "no readiness line")
}

// TestGCPercentOnceServing: a serving agentctl collects at --gc-percent
// (DefaultGCPercent unless given), seen as the Go runtime's own gauge; GOGC
// in its environment wins over the default, and the flag over GOGC.
func TestGCPercentOnceServing(t *testing.T) {
	t.Parallel()
	gogc := func(d *daemonProcess) string {
		t.Helper()
		for _, line := range strings.Split(scrapeText(t, d.ready.Metrics), "\n") {
			if v, ok := strings.CutPrefix(line, "go_gc_gogc_percent "); ok {
				return v
			}
		}
		t.Fatalf("no go_gc_gogc_percent in agentctl's metrics")
		return ""
	}
	assert.Equal(t, strconv.Itoa(DefaultGCPercent), gogc(startDaemon(t, "--metrics-addr", "127.0.0.1:0")), "the default")
	assert.Equal(t, "70", gogc(startDaemon(t, "--metrics-addr", "127.0.0.1:0", "--gc-percent", "70")), "the flag")
	const secret = "test-secret-for-the-daemon"
	env := []string{daemon.EnvSecret + "=" + secret, "GOGC=150"}
	assert.Equal(t, "150", gogc(spawnDaemon(t, []string{"--metrics-addr", "127.0.0.1:0"}, env)), "GOGC over the default")
	assert.Equal(t, "80", gogc(spawnDaemon(t, []string{"--metrics-addr", "127.0.0.1:0", "--gc-percent", "80"}, env)), "the flag over GOGC")
}
