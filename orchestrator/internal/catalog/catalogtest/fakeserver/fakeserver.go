// Package fakeserver is the tool set of the external MCP servers the
// catalog's tests run: a go-sdk server whose tools are replaced as a whole
// from a list of specs (the stdio server re-reads its list from a file
// before every request). Every tool answers a call with its own name, its
// arguments and the server's process id.
package fakeserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolSpec is one tool of a fake server.
type ToolSpec struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"` // default {"type":"object"}
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	ReadOnly     bool            `json:"readOnly,omitempty"`
	// ResultBytes, if set, makes the tool answer with a text of that many
	// bytes instead.
	ResultBytes int `json:"resultBytes,omitempty"`
}

// Toolset applies lists of specs to a server, touching only the tools
// whose spec changed.
type Toolset struct {
	server  *mcp.Server
	mu      sync.Mutex
	applied map[string][]byte // spec JSON by name
	// OnCall, if set, runs on every call before it is answered.
	OnCall func(name string, args json.RawMessage)
}

// New returns a Toolset serving through server.
func New(server *mcp.Server) *Toolset {
	return &Toolset{server: server, applied: map[string][]byte{}}
}

// Set makes specs the server's tool list.
func (ts *Toolset) Set(specs []ToolSpec) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	want := map[string]bool{}
	for _, spec := range specs {
		want[spec.Name] = true
		b, _ := json.Marshal(spec)
		if bytes.Equal(ts.applied[spec.Name], b) {
			continue
		}
		ts.applied[spec.Name] = b
		tool := &mcp.Tool{Name: spec.Name, Title: spec.Title, Description: spec.Description,
			InputSchema: spec.InputSchema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: spec.ReadOnly}}
		if len(spec.InputSchema) == 0 {
			tool.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		if len(spec.OutputSchema) > 0 {
			tool.OutputSchema = spec.OutputSchema
		}
		ts.server.AddTool(tool, ts.handler(spec.Name, spec.ResultBytes))
	}
	var gone []string
	for name := range ts.applied {
		if !want[name] {
			gone = append(gone, name)
			delete(ts.applied, name)
		}
	}
	if len(gone) > 0 {
		ts.server.RemoveTools(gone...)
	}
}

func (ts *Toolset) handler(name string, size int) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := json.RawMessage(req.Params.Arguments)
		if ts.OnCall != nil {
			ts.OnCall(name, args)
		}
		if size > 0 {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", size)}}}, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: fmt.Sprintf("%s called with %s by pid %d", name, args, os.Getpid())},
		}}, nil
	}
}

// ReadSpecs reads a JSON array of specs from a file.
func ReadSpecs(path string) ([]ToolSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var specs []ToolSpec
	return specs, json.Unmarshal(b, &specs)
}

// Start is the line a stdio server appends to its STARTS_FILE when it
// starts.
type Start struct {
	PID          int      `json:"pid"`
	Env          []string `json:"env"` // names of its environment's variables, sorted
	SecretSHA256 string   `json:"secret_sha256,omitempty"`
}
