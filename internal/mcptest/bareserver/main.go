// Command bareserver is a bare go-sdk MCP server process serving
// toolscope's tool definitions (a task with both providers) over
// streamable HTTP on loopback, with nothing of toolscope's around them: the
// floor of agentctl's start to first tools/list (docs/benchmarks.md). It
// prints its URL on its first line and serves until its stdin closes.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/registry"
)

func main() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare"}, nil)
	reg := registry.Build(registry.Spec{Mode: registry.ModeTask, Providers: providers.Of("github", "gitlab")})
	for _, t := range reg.Tools() {
		var output any
		if len(t.OutputSchema) > 0 {
			output = t.OutputSchema
		}
		srv.AddTool(&mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: output},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	go func() { _ = http.Serve(lis, handler) }()
	fmt.Printf("http://%s\n", lis.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}
