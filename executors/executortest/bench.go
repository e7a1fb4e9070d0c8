package executortest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
)

// BenchLaunch times launch → first tools/list answered on e (Launch, an
// MCP client connecting to the session's endpoint, the list), interleaved
// with floor, the same backend's cost of starting anything at all (its
// cleanup runs untimed).
// Stopping the session is outside the timing. prepare adapts the spec
// (an image) and may be nil.
func BenchLaunch(b *testing.B, e executors.Executor, prepare func(*executors.Spec), floor func(b *testing.B) (cleanup func())) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n := 0
	newSpec := func() executors.Spec {
		n++
		spec := executors.Spec{SessionID: fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e6, n), TaskID: "task_bench",
			WorkspaceID: "ws_bench", Mode: executors.ModeTask, Providers: providers.Of("github", "gitlab"), Generation: 1}
		if prepare != nil {
			prepare(&spec)
		}
		return spec
	}
	launchAndList := func() executors.Handle {
		h, st, err := e.Launch(ctx, newSpec(), nil)
		if err != nil {
			b.Fatalf("launch: %v", err)
		}
		c := mcptest.Connect(b, mcptest.HTTP(st.MCPURL, st.MCPToken), "")
		if len(c.Names(b)) == 0 {
			b.Fatal("empty tool list")
		}
		_ = c.Session.Close()
		return h
	}
	// One untimed launch first: a backend's first launch also waits for
	// what later ones find ready (a remote daemon still starting, a cold
	// page cache).
	if err := e.Stop(ctx, launchAndList()); err != nil {
		b.Fatalf("stop: %v", err)
	}
	var figure, base benchstats.Samples
	for b.Loop() {
		var h executors.Handle
		figure.Time(func() { h = launchAndList() })
		if err := e.Stop(ctx, h); err != nil {
			b.Fatalf("stop: %v", err)
		}
		var cleanup func()
		base.Time(func() { cleanup = floor(b) })
		if cleanup != nil {
			cleanup()
		}
	}
	benchstats.Report(b, figure, base)
}

// SpawnFloor starts a trivial static program and waits for its first
// line: the floor of a local launch.
func SpawnFloor(program string) func(b *testing.B) func() {
	return func(b *testing.B) func() {
		cmd := exec.Command(program)
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			b.Fatalf("trivial program said %q: %v", line, err)
		}
		_ = cmd.Wait()
		return nil
	}
}

// ContainerFloor runs a trivial static program in the test image (bind
// mounted, as agentctl is) and waits for its first line on the attached
// stdout: the floor of a docker launch — `docker run` of a scratch image
// to the program's first output. Removal is outside the timing.
func ContainerFloor(cli *client.Client, image, program string) func(b *testing.B) func() {
	return func(b *testing.B) func() {
		ctx := context.Background()
		created, err := cli.ContainerCreate(ctx, &container.Config{Image: image, Entrypoint: []string{"/trivial", "wait"},
			AttachStdout: true, AttachStdin: true, OpenStdin: true, StdinOnce: true,
			Labels: map[string]string{testutil.LabelTest: "container-floor"}}, // LeaveNothing finds it if left
			&container.HostConfig{Binds: []string{program + ":/trivial:ro"}}, nil, nil, "")
		if err != nil {
			b.Fatal(err)
		}
		remove := func() { _ = cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}) }
		att, err := cli.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdout: true, Stdin: true})
		if err != nil {
			remove()
			b.Fatal(err)
		}
		if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			att.Close()
			remove()
			b.Fatal(err)
		}
		// Non-TTY output is framed (an 8-byte header per chunk); the
		// payload is all that matters here.
		var seen []byte
		buf := make([]byte, 256)
		for !bytes.Contains(seen, []byte("ready\n")) {
			n, err := att.Reader.Read(buf)
			seen = append(seen, buf[:n]...)
			if err != nil {
				att.Close()
				remove()
				b.Fatalf("trivial container said %q: %v", seen, err)
			}
		}
		return func() { att.Close(); remove() }
	}
}

// BareServerFloor starts a bare go-sdk MCP server process serving the same
// tool definitions (internal/mcptest/bareserver, built once into dir) and
// lists its tools over streamable HTTP: the floor of agentctl's start to
// first tools/list, with nothing of toolscope's around the SDK. The process
// is stopped untimed.
func BareServerFloor(b *testing.B, dir string) func(b *testing.B) func() {
	program := dir + "/bareserver"
	build := exec.Command("go", "build", "-o", program, "github.com/toolscope/toolscope/internal/mcptest/bareserver")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build bareserver: %v\n%s", err, out)
	}
	return func(b *testing.B) func() {
		cmd := exec.Command(program)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stop := func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }
		url, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			stop()
			b.Fatalf("bareserver said %q: %v", url, err)
		}
		c := mcptest.Connect(b, mcptest.HTTP(url[:len(url)-1], ""), "")
		if len(c.Names(b)) == 0 {
			stop()
			b.Fatal("empty tool list")
		}
		return func() { _ = c.Session.Close(); stop() }
	}
}
