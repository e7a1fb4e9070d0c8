package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolscope/toolscope/agentctl/internal/daemon"
	"github.com/toolscope/toolscope/agentctl/internal/mcpbridge"
	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/bearer"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
)

// BenchmarkFootprint: the size of the static agentctl binary as `make
// build` makes it, and the resident memory of `agentctl serve` idle with
// 1 and with 10 sessions, each against the floor of a trivial static Go
// program (testutil.TrivialProgram, blocked on a read) — what any Go
// process costs on this machine.
func BenchmarkFootprint(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "agentctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/toolscope/toolscope/agentctl/cmd/agentctl")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as `make build`
	out, err := build.CombinedOutput()
	require.NoError(b, err, "go build agentctl: %s", out)
	floorBin := testutil.BuildProgram(b, b.TempDir(), testutil.TrivialProgram)

	for b.Loop() {
		size, floorSize := fileSize(b, bin), fileSize(b, floorBin)
		b.ReportMetric(float64(size)/1e6, "binary-MB")
		b.ReportMetric(float64(floorSize)/1e6, "floor-binary-MB")
		b.ReportMetric(float64(size)/float64(floorSize), "binary-ratio")

		floorCmd := exec.Command(floorBin, "wait")
		stdin, err := floorCmd.StdinPipe()
		require.NoError(b, err)
		_, _ = firstLine(b, floorCmd)
		floorRSS := vmRSS(b, floorCmd.Process.Pid)
		_ = stdin.Close()
		_ = floorCmd.Wait()

		const secret = "bench-secret"
		cmd := exec.Command(bin, "serve", "--state-dir", b.TempDir(), "--log-level", "error")
		cmd.Env = append(withoutSecret(os.Environ()), daemon.EnvSecret+"="+secret)
		var rss1, rss10 float64
		func() {
			var ready Ready
			line, logs := firstLine(b, cmd)
			require.NoError(b, json.Unmarshal([]byte(line), &ready), "readiness line %q; logs: %s", line, logs.String())
			conn, err := grpc.NewClient(ready.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithPerRPCCredentials(bearer.Credentials(secret, false)))
			require.NoError(b, err)
			defer conn.Close()
			client := agentctlv1.NewAgentctlServiceClient(conn)
			for i := range 10 {
				_, err := client.CreateSession(context.Background(), &agentctlv1.CreateSessionRequest{Spec: &agentctlv1.LaunchSpec{
					SessionId: fmt.Sprintf("s%d", i), TaskId: "task_1",
					ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github", "gitlab"}, Generation: 1}}})
				require.NoError(b, err)
				if i == 0 {
					rss1 = vmRSS(b, cmd.Process.Pid)
				}
			}
			rss10 = vmRSS(b, cmd.Process.Pid)
		}()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.ReportMetric(floorRSS/1e6, "floor-rss-MB")
		b.ReportMetric(rss1/1e6, "rss-1-session-MB")
		b.ReportMetric(rss10/1e6, "rss-10-sessions-MB")
		b.ReportMetric(rss1/floorRSS, "rss-1-ratio")
		b.ReportMetric(0, "ns/op")
	}
}

func fileSize(b *testing.B, path string) int64 {
	fi, err := os.Stat(path)
	require.NoError(b, err)
	return fi.Size()
}

// vmRSS reads VmRSS from /proc (Linux), in bytes.
func vmRSS(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(b, err)
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			require.NoError(b, err)
			return kb * 1024
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

var benchLists = flag.Int("bench-lists", 1000, "lists per client in BenchmarkListingMemory")

// BenchmarkListingMemory: the resident memory of `agentctl serve` hosting
// 64 sessions (its default limit), each with a live client that lists the
// tools 1,000 times, per protocol version: stateful 2025-11-25 sessions
// keep what they sent for resuming (bounded by --mcp-event-bytes and
// --mcp-event-age), stateless 2026-07-28 ones keep nothing. The floor is
// the same process with the same clients connected, before they list;
// rss is read as the last list is answered, settled-rss settleFor later
// (what the process keeps once the burst is over: agentctl returns a
// burst's memory on its first quiet --idle-reclaim interval).
func BenchmarkListingMemory(b *testing.B) {
	const sessions = 64
	lists := *benchLists
	if os.Getenv("TOOLSCOPE_BENCH_SMOKE") != "" {
		lists = 10 // make bench-smoke: that it runs, not what it measures
	}
	bin := filepath.Join(b.TempDir(), "agentctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/toolscope/toolscope/agentctl/cmd/agentctl")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(b, err, "go build agentctl: %s", out)
	for b.Loop() {
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			idle, listed, settled := listingRSS(b, bin, version, sessions, lists)
			b.ReportMetric(listed/1e6, "rss-"+version+"-MB")
			b.ReportMetric(settled/1e6, "settled-rss-"+version+"-MB")
			b.ReportMetric(idle/1e6, "floor-rss-"+version+"-MB")
		}
		b.ReportMetric(0, "ns/op")
	}
}

// settleFor is how long after its last list agentctl's settled RSS is
// read: the measure's definition (two --idle-reclaim intervals and a
// margin), not a wait for an event.
const settleFor = 3 * time.Second

// listingRSS starts agentctl with n sessions, connects a client of version
// to each, and returns its RSS then, after each client listed lists times,
// and settleFor later.
func listingRSS(b *testing.B, bin, version string, n, lists int) (idle, listed, settled float64) {
	const secret = "bench-secret"
	state := b.TempDir()
	cmd := exec.Command(bin, "serve", "--state-dir", state, "--log-level", "error")
	cmd.Env = append(withoutSecret(os.Environ()), daemon.EnvSecret+"="+secret)
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var ready Ready
	line, logs := firstLine(b, cmd)
	require.NoError(b, json.Unmarshal([]byte(line), &ready), "readiness line %q; logs: %s", line, logs.String())
	conn, err := grpc.NewClient(ready.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer.Credentials(secret, false)))
	require.NoError(b, err)
	defer conn.Close()
	client := agentctlv1.NewAgentctlServiceClient(conn)
	ctx := context.Background()
	clients := make([]*mcp.ClientSession, n)
	for i := range n {
		id := fmt.Sprintf("s%d", i)
		res, err := client.CreateSession(ctx, &agentctlv1.CreateSessionRequest{Spec: &agentctlv1.LaunchSpec{
			SessionId: id, TaskId: "task_1", ProviderSet: &agentctlv1.ProviderSet{Providers: []string{"github", "gitlab"}, Generation: 1}}})
		require.NoError(b, err)
		var cfg mcpbridge.Config
		raw, err := os.ReadFile(filepath.Join(state, "sessions", id, "bridge.json"))
		require.NoError(b, err)
		require.NoError(b, json.Unmarshal(raw, &cfg))
		clients[i], err = mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx,
			mcptest.HTTP(res.GetStatus().GetMcpUrl(), cfg.Token), &mcp.ClientSessionOptions{ProtocolVersion: version})
		require.NoError(b, err)
		defer clients[i].Close()
	}
	idle = vmRSS(b, cmd.Process.Pid)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, cs := range clients {
		wg.Go(func() {
			for range lists {
				if _, err := cs.ListTools(ctx, nil); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(b, errors.Join(errs...))
	listed = vmRSS(b, cmd.Process.Pid)
	time.Sleep(settleFor)
	return idle, listed, vmRSS(b, cmd.Process.Pid)
}
