package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/registry"
	"github.com/toolscope/toolscope/internal/toolapi"
)

// The checks and results every tool handler shares, whoever answers the
// call: agentctl forwards it over its Attach stream, the orchestrator's
// hosted endpoint dispatches it in-process. Both check a call's arguments
// here first, so a malformed call never reaches the orchestrator's
// checks, and both name a task_add_sources call's new tools here.

// MaxCachedSchemas bounds the resolved input schemas a Schemas
// remembers: built-in schemas are a fixed few, but external tools'
// schemas come from pushes and change as the catalog does; beyond the
// bound a schema is resolved on every use, and memory stays bounded
// however long the process runs.
const MaxCachedSchemas = 4096

// Schemas resolves tool input schemas, each distinct text once (see
// MaxCachedSchemas). A resolved schema is read-only, so concurrent calls
// share it. The zero value is ready to use.
type Schemas struct {
	m sync.Map     // schema text → resolvedSchema
	n atomic.Int64 // entries stored in m
}

type resolvedSchema struct {
	schema *jsonschema.Resolved
	err    error
}

// Resolve returns raw resolved.
func (c *Schemas) Resolve(raw json.RawMessage) (*jsonschema.Resolved, error) {
	key := string(raw)
	if r, ok := c.m.Load(key); ok {
		return r.(resolvedSchema).schema, r.(resolvedSchema).err
	}
	var schema jsonschema.Schema
	r := resolvedSchema{err: json.Unmarshal(raw, &schema)}
	if r.err == nil {
		r.schema, r.err = schema.Resolve(nil)
	}
	if c.n.Load() >= MaxCachedSchemas {
		return r.schema, r.err
	}
	actual, loaded := c.m.LoadOrStore(key, r)
	if !loaded {
		c.n.Add(1)
	}
	return actual.(resolvedSchema).schema, actual.(resolvedSchema).err
}

// CheckArguments returns a call's arguments ({} when it sent none) if
// they are a JSON object of at most toolapi.MaxArgumentBytes that the
// tool's input schema accepts; otherwise the refusal to answer with, which
// the publisher serving the call with ctx reports (refusals.go).
func (c *Schemas) CheckArguments(ctx context.Context, tool registry.Tool, args json.RawMessage) (json.RawMessage, *mcp.CallToolResult) {
	refuse := func(code, msg string) (json.RawMessage, *mcp.CallToolResult) {
		markRefused(ctx, tool.Name, code)
		return nil, ToolError(code, msg)
	}
	if len(args) > toolapi.MaxArgumentBytes {
		return refuse(toolapi.CodeArgumentsTooLarge, toolapi.ArgumentsTooLarge(len(args)))
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	var value any
	if err := json.Unmarshal(args, &value); err != nil {
		return refuse(toolapi.CodeInvalidArguments, "arguments are not valid JSON: "+err.Error())
	}
	if _, isObject := value.(map[string]any); !isObject {
		return refuse(toolapi.CodeInvalidArguments, "arguments must be a JSON object")
	}
	resolved, err := c.Resolve(tool.InputSchema)
	if err != nil {
		return nil, ToolError(toolapi.CodeInternal, "the tool's schema is invalid; report this to the toolscope operator")
	}
	if verr := resolved.Validate(value); verr != nil {
		return refuse(toolapi.CodeInvalidArguments, strings.TrimPrefix(verr.Error(), "validating root: "))
	}
	return args, nil
}

// ToolError is a refusal as the agent reads it: IsError, and the text
// led by its stable code.
func ToolError(code, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: code + ": " + msg}}}
}

// AddedGeneration is the provider-set generation a successful
// task_add_sources result applied, if it applied one (not pending).
func AddedGeneration(res *mcp.CallToolResult) (uint64, bool) {
	out, ok := addSourcesResult(res)
	return out.Generation, ok
}

// NameToolsAdded completes a task_add_sources result that changed the
// caller's own surface from before to after: it names the tools that
// became available (tools_added, and in the text). The publisher then
// holds the result until the session's clients adopted them (adopt.go,
// ADR 0019).
func NameToolsAdded(res *mcp.CallToolResult, before, after *registry.Registry) {
	out, ok := addSourcesResult(res)
	if !ok {
		return
	}
	for _, name := range after.Names() {
		if _, had := before.Lookup(name); !had {
			out.ToolsAdded = append(out.ToolsAdded, name)
		}
	}
	if len(out.ToolsAdded) == 0 {
		return
	}
	if b, err := json.Marshal(out); err == nil {
		res.StructuredContent = json.RawMessage(b)
	}
	res.Content = append(res.Content, &mcp.TextContent{Text: "Tools now available to you: " + strings.Join(out.ToolsAdded, ", ") + "."})
}

func addSourcesResult(res *mcp.CallToolResult) (toolapi.AddSourcesResult, bool) {
	var out toolapi.AddSourcesResult
	raw, ok := res.StructuredContent.(json.RawMessage)
	if !ok || res.IsError || json.Unmarshal(raw, &out) != nil || out.Pending || out.Generation == 0 {
		return out, false
	}
	return out, true
}
