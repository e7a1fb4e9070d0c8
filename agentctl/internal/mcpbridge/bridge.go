// Package mcpbridge implements `agentctl mcp`: a stdio MCP server for
// agents that only spawn stdio servers. It mirrors one session's MCP
// endpoint: it lists the session's tools over streamable HTTP, publishes
// the same definitions through an mcpserver.Publisher on stdio, re-lists
// whenever the session notifies tools/list_changed (so its own clients get
// the same notification), and forwards every call to the session. The
// agent therefore sees the same registry and the same notifications on
// both transports.
//
// It takes its endpoint from a config file, not from the environment: MCP
// hosts such as the TypeScript SDK pass a spawned stdio server only a few
// environment variables.
package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/mcpserver"
	"github.com/toolscope/toolscope/internal/registry"
)

// Config names the session a bridge mirrors. agentctl writes it as
// bridge.json (mode 0600) next to each session's mcp.json.
type Config struct {
	URL       string `json:"url"`
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
}

// LoadConfig reads a Config file.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read bridge config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("bridge config %s: %w", path, err)
	}
	if c.URL == "" || c.Token == "" {
		return c, fmt.Errorf("bridge config %s: url and token are required", path)
	}
	return c, nil
}

// Run serves the session named by cfg over transport until the client
// disconnects or ctx ends.
func Run(ctx context.Context, cfg Config, transport mcp.Transport, version string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	resync := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "agentctl-mcp-bridge", Version: version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case resync <- struct{}{}:
			default: // a re-list is already pending; it will see this change
			}
		},
	})
	connectCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	upstream, err := client.Connect(connectCtx, &mcp.StreamableClientTransport{
		Endpoint:   cfg.URL,
		HTTPClient: &http.Client{Transport: bearerTransport{token: cfg.Token}},
	}, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("connect to session %s at %s: %w", cfg.SessionID, cfg.URL, err)
	}
	defer upstream.Close()

	initial, err := list(ctx, upstream)
	if err != nil {
		return err
	}
	// The session's instructions as of this connection (built at its
	// initialize): the stdio client initializes with the bridge once.
	pub := mcpserver.New(initial, mcpserver.Options{
		Name: "toolscope", Version: version, Logger: log, Instructions: upstream.InitializeResult().Instructions,
		Handler: func(tool registry.Tool) mcp.ToolHandler {
			return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := upstream.CallTool(ctx, &mcp.CallToolParams{Name: tool.Name, Arguments: req.Params.Arguments})
				if err != nil {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
						Text: "session_unreachable: the toolscope session did not answer: " + err.Error(),
					}}}, nil
				}
				return res, nil
			}
		},
	})
	defer pub.Close()

	relistCtx, stopRelist := context.WithCancel(ctx)
	defer stopRelist()
	go func() {
		for {
			select {
			case <-relistCtx.Done():
				return
			case <-resync:
			}
			r, err := list(relistCtx, upstream)
			if err != nil {
				if relistCtx.Err() == nil {
					log.Warn("re-listing the session's tools failed", "error", err)
				}
				continue
			}
			pub.Publish(r)
		}
	}()
	err = pub.Server().Run(ctx, transport)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func list(ctx context.Context, cs *mcp.ClientSession) (*registry.Registry, error) {
	var tools []registry.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list the session's tools: %w", err)
		}
		input, err := json.Marshal(tool.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", tool.Name, err)
		}
		var output []byte
		if tool.OutputSchema != nil {
			if output, err = json.Marshal(tool.OutputSchema); err != nil {
				return nil, fmt.Errorf("tool %s: %w", tool.Name, err)
			}
		}
		tools = append(tools, mcpserver.FromMCP(tool, input, output))
	}
	return registry.FromTools(tools), nil
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
