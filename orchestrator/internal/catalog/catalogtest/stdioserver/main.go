// Command stdioserver is the external MCP server the catalog's tests run
// over stdio. Its environment says what it does:
//
//	TOOLS_FILE   a JSON array of fakeserver.ToolSpec, read again before
//	             every request, so the test changes the tool list by
//	             rewriting the file;
//	STARTS_FILE  (optional) gets one JSON line per start: the pid, the
//	             names of the environment's variables, and the SHA-256 of
//	             $SECRET when it is set;
//	CALLS_FILE   (optional) gets one line per tool call: the tool's name;
//	PAGE_SIZE    (optional) tools per tools/list page.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest/fakeserver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stdioserver:", err)
		os.Exit(1)
	}
}

func run() error {
	toolsFile := os.Getenv("TOOLS_FILE")
	if toolsFile == "" {
		return fmt.Errorf("TOOLS_FILE is not set")
	}
	if path := os.Getenv("STARTS_FILE"); path != "" {
		start := fakeserver.Start{PID: os.Getpid()}
		for _, kv := range os.Environ() {
			start.Env = append(start.Env, strings.SplitN(kv, "=", 2)[0])
		}
		slices.Sort(start.Env)
		if s, ok := os.LookupEnv("SECRET"); ok {
			sum := sha256.Sum256([]byte(s))
			start.SecretSHA256 = hex.EncodeToString(sum[:])
		}
		if err := appendLine(path, start); err != nil {
			return err
		}
	}
	pageSize, _ := strconv.Atoi(os.Getenv("PAGE_SIZE"))
	server := mcp.NewServer(&mcp.Implementation{Name: "stdioserver", Version: "1.2.3"}, &mcp.ServerOptions{
		PageSize:     pageSize,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	tools := fakeserver.New(server)
	if path := os.Getenv("CALLS_FILE"); path != "" {
		tools.OnCall = func(name string, _ json.RawMessage) { _ = appendLine(path, name) }
	}
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" || method == "tools/call" {
				specs, err := fakeserver.ReadSpecs(toolsFile)
				if err != nil {
					return nil, fmt.Errorf("read the tools file: %w", err)
				}
				tools.Set(specs)
			}
			return next(ctx, method, req)
		}
	})
	return server.Run(context.Background(), &mcp.StdioTransport{})
}

func appendLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
