package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/toolapi"
)

// Self-triggered changes (ADR 0019). A call whose result names tools_added
// (task_add_sources) changed the caller's own surface. Its result is held,
// for at most AdoptWait, until:
//
//   - the publisher serves every tool it names;
//   - each client of the session was sent list_changed for that surface
//     (or listed it, or connected after it);
//   - the caller itself, if it re-lists on a notification, has listed it:
//     an agent then builds its very next model turn with the new tools.
//
// A result released at the bound is released as it is: the change still
// reaches the clients, one turn later.
//
// Clients that never re-list (NeverRelists: Codex today) are offered
// call_tool, an entry point that calls any tool of the session by name, and
// a self-triggered result tells them to use it, with each new tool's input
// schema.

// DefaultAdoptWait bounds how long a self-triggered change's result waits
// for the session's clients to adopt the change.
const DefaultAdoptWait = 2 * time.Second

// NeverRelists lists the MCP client names (clientInfo.name at
// initialization) of clients known to ignore notifications/tools/list_changed.
var NeverRelists = []string{"codex-mcp-client"}

// relists reports whether the client of ss is expected to re-list on a
// notification: unknown clients are.
func relists(ss *mcp.ServerSession) bool {
	init := ss.InitializeParams()
	if init == nil || init.ClientInfo == nil {
		return true
	}
	return !slices.Contains(NeverRelists, init.ClientInfo.Name)
}

// modern reports whether ss speaks 2026-07-28 or later, where a session is
// notified only while it listens (subscriptions/listen).
func modern(ss *mcp.ServerSession) bool {
	init := ss.InitializeParams()
	return init != nil && init.ProtocolVersion >= "2026-07-28"
}

// wakeLocked wakes every adopt waiting. notifiedMu is held.
func (p *Publisher) wakeLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

func (p *Publisher) wakeAll() {
	p.notifiedMu.Lock()
	p.wakeLocked()
	p.notifiedMu.Unlock()
}

// record notes, for ss, the epoch of its last list_changed sent, listing,
// or start. Every pruneEvery records, the entries of closed sessions are
// dropped (applications drop them too): a stateless HTTP client makes a
// session per request.
func (p *Publisher) record(m map[*mcp.ServerSession]uint64, ss *mcp.ServerSession, epoch uint64) {
	p.notifiedMu.Lock()
	if epoch > m[ss] || m[ss] == 0 {
		m[ss] = epoch
	}
	p.wakeLocked()
	p.records++
	prune := p.records%pruneEvery == 0
	p.notifiedMu.Unlock()
	if prune {
		p.forgetClosedSessions()
	}
}

// recordListed notes that ss listed the surface of epoch, if ss is a
// session that started here. A stateless (2026-07-28 over HTTP) client
// makes a session per request, which adopted never looks at; recording
// each one held it, and what it pinned, until the next pruning: with 64
// sessions listing in a loop, ~90 MB.
func (p *Publisher) recordListed(ss *mcp.ServerSession, epoch uint64) {
	p.notifiedMu.Lock()
	_, started := p.joined[ss]
	p.notifiedMu.Unlock()
	if started {
		p.record(p.listed, ss, epoch)
	}
}

// pruneEvery is how many records go between two prunings of closed
// sessions' entries.
const pruneEvery = 256

// servedAt returns the epoch of the published surface if it serves every
// one of names, and 0 if it does not (yet).
func (p *Publisher) servedAt(names []string) uint64 {
	p.listMu.RLock()
	published, epoch := p.published, p.epoch.Load()
	p.listMu.RUnlock()
	for _, n := range names {
		if _, ok := published.Lookup(n); !ok {
			return 0
		}
	}
	return epoch
}

// adopted reports whether the session's clients adopted the surface of
// epoch (see the comment at the top): later changes do not count, so a
// change is adopted once its own notification went out, however busy the
// session is with others.
func (p *Publisher) adopted(caller *mcp.ServerSession, epoch uint64) bool {
	var sessions []*mcp.ServerSession
	for ss := range p.server.Sessions() {
		sessions = append(sessions, ss)
	}
	p.notifiedMu.Lock()
	defer p.notifiedMu.Unlock()
	for _, ss := range sessions {
		joined, known := p.joined[ss]
		if !known {
			continue // a session that never started here (one stateless request)
		}
		if _, listens := p.listening[ss]; modern(ss) && !listens {
			continue // a 2026-07-28 session that does not listen is never notified
		}
		if p.sent[ss] < epoch && p.listed[ss] < epoch && joined < epoch {
			return false
		}
	}
	if _, known := p.joined[caller]; known && caller != nil && relists(caller) {
		if _, listens := p.listening[caller]; modern(caller) && !listens {
			return true // never notified, so it has nothing to re-list on
		}
		return p.listed[caller] >= epoch || p.joined[caller] >= epoch
	}
	return true
}

// adopt waits, at most p.adoptWait, until names are adopted.
func (p *Publisher) adopt(ctx context.Context, caller *mcp.ServerSession, names []string) bool {
	timer := time.NewTimer(p.adoptWait)
	defer timer.Stop()
	var target uint64
	for {
		p.notifiedMu.Lock()
		wake := p.wake
		p.notifiedMu.Unlock()
		if target == 0 {
			// The first surface that serves names is the change to adopt.
			target = p.servedAt(names)
		}
		if target != 0 && p.adopted(caller, target) {
			return true
		}
		select {
		case <-wake:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// selfChanges is the receiving middleware of tools/call: it routes
// call_tool for clients that never re-list, and holds a self-triggered
// result until the change is adopted.
func (p *Publisher) selfChanges(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		switch method {
		case "notifications/initialized", "server/discover":
			res, err := next(ctx, method, req)
			if ss != nil {
				p.record(p.joined, ss, p.epoch.Load())
			}
			return res, err
		case "subscriptions/listen":
			// A 2026-07-28 session is notified only once it listens (the
			// request lasts as long as the subscription).
			if ss != nil {
				p.record(p.listening, ss, p.epoch.Load())
			}
			return next(ctx, method, req)
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || ss == nil {
			return next(ctx, method, req)
		}
		static := !relists(ss)
		if static && call.Params.Name == toolapi.CallTool {
			if refused := p.route(ctx, call); refused != nil {
				return refused, nil
			}
		}
		res, err := next(ctx, method, req)
		out, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || out.IsError || out.StructuredContent == nil {
			return res, err
		}
		var change toolapi.SelfChange
		if b, err := json.Marshal(out.StructuredContent); err != nil || json.Unmarshal(b, &change) != nil || len(change.ToolsAdded) == 0 {
			return res, err
		}
		start := time.Now()
		adopted := p.adopt(ctx, ss, change.ToolsAdded)
		p.log.Debug("self-triggered change", "tools_added", change.ToolsAdded, "adopted", adopted, "waited", time.Since(start))
		if static {
			p.hintCallTool(out, change.ToolsAdded)
		}
		return out, nil
	}
}

// route turns a call_tool call into a call of the tool it names, or
// returns the refusal.
func (p *Publisher) route(ctx context.Context, call *mcp.CallToolRequest) *mcp.CallToolResult {
	var args toolapi.CallToolArgs
	if err := json.Unmarshal(call.Params.Arguments, &args); err != nil || args.Name == "" {
		markRefused(ctx, toolapi.CallTool, toolapi.CodeInvalidArguments)
		return ToolError(toolapi.CodeInvalidArguments, `call_tool takes {"name": "<tool>", "arguments": {...}}`)
	}
	if _, ok := p.Published().Lookup(args.Name); !ok || args.Name == toolapi.CallTool {
		markRefused(ctx, args.Name, toolapi.CodeUnknownTool)
		return ToolError(toolapi.CodeUnknownTool, fmt.Sprintf("%q is not a tool of this session; its tools: %s", args.Name, strings.Join(p.Published().Names(), ", ")))
	}
	if args.Arguments == nil {
		args.Arguments = map[string]any{}
	}
	raw, err := json.Marshal(args.Arguments)
	if err != nil {
		return ToolError(toolapi.CodeInvalidArguments, err.Error())
	}
	call.Params.Name, call.Params.Arguments = args.Name, raw
	return nil
}

// hintCallTool tells a client that never re-lists how to call the tools
// a change added, with their input schemas: in the text and in the
// structured result (call_with, input_schemas), which agents show instead
// of the text when there is one.
func (p *Publisher) hintCallTool(out *mcp.CallToolResult, names []string) {
	published := p.Published()
	schemas := map[string]any{}
	var b strings.Builder
	fmt.Fprintf(&b, "Your MCP client does not reload its tool list: call these new tools through %s, "+
		`as {"name": "<tool>", "arguments": {...}}. Their input schemas:`, toolapi.CallTool)
	for _, n := range names {
		if t, ok := published.Lookup(n); ok {
			var schema any
			_ = json.Unmarshal(t.InputSchema, &schema)
			schemas[n] = schema
			fmt.Fprintf(&b, "\n%s: %s", n, compactJSON(t.InputSchema))
		}
	}
	out.Content = append(out.Content, &mcp.TextContent{Text: b.String()})
	var structured map[string]any
	if raw, err := json.Marshal(out.StructuredContent); err == nil && json.Unmarshal(raw, &structured) == nil {
		structured["call_with"], structured["input_schemas"] = toolapi.CallTool, schemas
		out.StructuredContent = structured
	}
}

func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// callToolDefinition is call_tool as listed to clients that never re-list.
var callToolDefinition = &mcp.Tool{
	Name: toolapi.CallTool,
	Description: "Calls a tool of this toolscope session by name. Use it for tools that became available after your " +
		"tool list was loaded (task_add_sources names them, with their input schemas); call every other tool directly.",
	InputSchema: json.RawMessage(toolapi.InputSchema[toolapi.CallToolArgs]()),
	Annotations: &mcp.ToolAnnotations{Title: "Call a session tool by name"},
}
