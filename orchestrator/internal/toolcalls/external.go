package toolcalls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/internal/tracing"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Codes of calls to external (catalog) tools, beyond the model's gate
// codes (tool_not_assigned, provider_disabled, tool_disabled,
// tool_unavailable).
const (
	// CodeExternalFailed: the external server could not be reached or did
	// not answer.
	CodeExternalFailed = "external_provider_failed"
	// CodeExternalToolError: the external tool ran and reported an error.
	CodeExternalToolError = "external_tool_error"
)

// ExternalCaller forwards a call to an external MCP server's tool (by its
// name on the server); catalog.Pool is the one in use.
type ExternalCaller interface {
	Call(ctx context.Context, prov model.MCPServer, externalName string, args json.RawMessage) (*mcp.CallToolResult, error)
}

// SetExternalCaller installs what forwards calls to catalog tools; without
// one, catalog tools are unknown tools.
func (d *Dispatcher) SetExternalCaller(c ExternalCaller) { d.external = c }

// handleExternal answers a call to a catalog tool: the runtime gate is
// checked again now — assigned to the session's workspace, server
// enabled, tool enabled, tool available — whatever the agent was shown,
// and only then is the call forwarded. ok is false when no catalog tool
// has that name.
func (d *Dispatcher) handleExternal(ctx context.Context, c Call, s scope, args json.RawMessage) (res Result, ok bool) {
	if d.external == nil {
		return Result{}, false
	}
	target, err := d.store.CatalogToolForCall(ctx, c.Tool)
	if errors.Is(err, errdefs.ErrNotFound) {
		return Result{}, false
	} else if err != nil {
		return d.internal(ctx, c, err), true
	}
	switch block := target.Gate(s.task.WorkspaceID); block {
	case model.BlockNotAssigned:
		return fail(string(block), "%s is not assigned to this task's workspace; ask the operator to assign it", c.Tool), true
	case model.BlockServerDisabled:
		return fail(string(block), "the MCP server %q is disabled; ask the operator to enable it", target.Server.Name), true
	case model.BlockToolDisabled:
		return fail(string(block), "%s is disabled; ask the operator to enable it", c.Tool), true
	case model.BlockToolUnavailable:
		return fail(string(block), "%s is no longer offered by %q (its last discovery did not list it)", c.Tool, target.Server.Name), true
	}
	if readOnlySession(s.session) && !target.Tool.ReadOnly {
		// The catalog record's read-only flag: the one agentctl is sent.
		return readOnlyRefusal(c.Tool), true
	}
	tracing.Stage(ctx, "catalog: assigned, enabled, available; the mode allows it")
	out, err := d.external.Call(ctx, target.Server, target.Tool.ExternalName, args)
	var big *toolapi.ResultTooLargeError
	if errors.As(err, &big) {
		// The pool stopped reading the server's answer at its bound: the
		// call ran, its result is not held, and the connection lives on.
		d.log.InfoContext(ctx, "external tool result over the bound", "tool", c.Tool, "server", target.Server.Name, "error", err.Error())
		return fail(toolapi.CodeResultTooLarge, "%s", toolapi.ResultTooLarge(c.Tool, big.Bytes, big.More)), true
	}
	if err != nil {
		d.log.WarnContext(ctx, "external tool call failed", "tool", c.Tool, "server", target.Server.Name, "error", err.Error())
		return fail(CodeExternalFailed, "the call to %q failed: %v", target.Server.Name, err), true
	}
	return fromExternal(out), true
}

// fromExternal turns an external server's result into the call's result:
// its text content joined, its structured content kept. Other content
// (images, audio, resources) does not travel over Attach; the text says
// how much was left out, so the agent is not misled.
func fromExternal(r *mcp.CallToolResult) Result {
	var texts []string
	omitted := 0
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		} else {
			omitted++
		}
	}
	if omitted > 0 {
		texts = append(texts, fmt.Sprintf("[%d non-text content item(s) omitted: toolscope forwards text and structured results only]", omitted))
	}
	res := Result{Text: strings.Join(texts, "\n"), Structured: r.StructuredContent}
	if r.IsError {
		res.IsError, res.Code = true, CodeExternalToolError
	}
	return res
}
