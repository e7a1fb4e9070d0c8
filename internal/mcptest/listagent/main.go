// Command listagent is the agent of the CLI launch benchmark
// (orchestrator/cmd/toolscope BenchmarkSessionLaunchToFirstList): an MCP
// client on its session's endpoint (TOOLSCOPE_MCP_URL and
// TOOLSCOPE_MCP_TOKEN, which agentctl sets), as an agent host is. Once it
// holds its first tools/list it reports "<session id> <tools listed>" on
// a line to the TCP address in $LISTAGENT_REPORT, then stays connected
// until it is stopped.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvReport names the address listagent reports to.
const EnvReport = "LISTAGENT_REPORT"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "listagent:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	transport := &mcp.StreamableClientTransport{Endpoint: os.Getenv("TOOLSCOPE_MCP_URL"), MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer(os.Getenv("TOOLSCOPE_MCP_TOKEN"))}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "listagent", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	conn, err := net.Dial("tcp", os.Getenv(EnvReport))
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err = fmt.Fprintf(conn, "%s %d\n", os.Getenv("TOOLSCOPE_SESSION_ID"), len(res.Tools))
	_ = conn.Close()
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	<-ctx.Done()
	return nil
}

// bearer sends token as a bearer token on every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
