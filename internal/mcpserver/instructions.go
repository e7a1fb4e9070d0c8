package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// InstructWith makes the server instructions of every initialize (and
// 2026-07-28 server/discover) result instructions() at that moment,
// rather than the fixed Options.Instructions: a client that initializes
// again after a change reads the change. MCP has no notification that
// instructions changed, so a connected client keeps the ones it read.
func (p *Publisher) InstructWith(instructions func() string) {
	p.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			switch r := res.(type) {
			case *mcp.InitializeResult:
				r.Instructions = instructions()
			case *mcp.DiscoverResult:
				r.Instructions = instructions()
			}
			return res, err
		}
	})
}
