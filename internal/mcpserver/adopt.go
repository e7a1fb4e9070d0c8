package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
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
//   - every client that is notified at all was sent list_changed for that
//     surface (or listed it, or connected after it): the sessions of
//     2025-06-18 and 2025-11-25 clients (stdio, or HTTP with a GET stream),
//     and every subscriptions/listen stream of 2026-07-28 clients — on
//     stdio one session, over HTTP a request of its own;
//   - the caller, unless it is known not to re-list, listed that surface
//     after the notification: an agent then builds its very next model
//     turn with the new tools.
//
// A result released at the bound is released as it is: the change still
// reaches the clients, one turn later.
//
// Whether a client re-lists is learnt from what it does, never from its
// name (a habit): a 2026-07-28 client that subscribes to list_changed, or
// any client that lists after a notification, re-lists; a client whose
// re-list did not come within AdoptWait does not. Clients not known to
// re-list (a 2025 client before its first change, one that did not) are
// offered call_tool, an entry point that calls any tool of the session by
// name, and a self-triggered result that was not re-listed tells them to
// use it, with each new tool's input schema. The per-request sessions of a
// stateless (2026-07-28 HTTP) client cannot be told apart: they share one
// peer, the publisher's stateless one.

// DefaultAdoptWait bounds how long a self-triggered change's result waits
// for the session's clients to adopt the change, and so how long a client
// may take to re-list before it is taken for one that does not.
const DefaultAdoptWait = 2 * time.Second

// habit is whether a client re-lists on list_changed, as far as is known.
type habit int8

const (
	habitUnknown habit = iota
	habitRelists
	habitStatic // a re-list did not come within AdoptWait
)

// peer is what the publisher knows of one client session (or, for
// stateless, of all per-request sessions together). Epochs are those of
// applications (Publisher.epoch).
type peer struct {
	started   bool   // it initialized here (initialize, or server/discover)
	joined    uint64 // the epoch at its start
	modern    bool   // 2026-07-28 or later: notified only while it listens
	listening uint64 // the epoch it subscribed to list_changed at; 0 while it does not listen
	notified  uint64 // the epoch of the last list_changed let through (oneNotificationPerEpoch), set before it is sent
	sent      uint64 // the epoch of the last list_changed sent
	listed    uint64 // the epoch of its last listing
	habit     habit
}

// reached reports whether the peer has the surface of epoch, or was told
// of it: it was sent list_changed for it, listed it, or started or
// subscribed after it.
func (e *peer) reached(epoch uint64) bool {
	return e.sent >= epoch || e.listed >= epoch || (e.started && e.joined >= epoch) || e.listening >= epoch
}

// notifiable reports whether the SDK notifies the peer at all.
func (e *peer) notifiable() bool {
	if e.started && !e.modern {
		return true
	}
	return e.listening > 0
}

// relistPending reports whether the peer was notified of epoch (or later)
// and has not listed it since, and may yet re-list.
func (e *peer) relistPending(epoch uint64) bool {
	return e.habit != habitStatic && e.sent >= epoch && e.listed < epoch && !(e.started && e.joined >= epoch)
}

// peerLocked returns the peer of ss, creating it; a session that did not
// start here is a per-request one, whose client is the stateless peer,
// except for its own listen stream. notifiedMu is held.
func (p *Publisher) peerLocked(ss *mcp.ServerSession) *peer {
	e := p.peers[ss]
	if e == nil {
		e = &peer{}
		p.peers[ss] = e
	}
	return e
}

// clientLocked returns the peer that stands for the client of ss: its own
// if it started here, the stateless peer if it is one request of a
// stateless client. notifiedMu is held.
func (p *Publisher) clientLocked(ss *mcp.ServerSession) *peer {
	if e := p.peers[ss]; e != nil && e.started {
		return e
	}
	return &p.stateless
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

// update applies f to the peers of ss under notifiedMu and wakes every
// adopt waiting. Every pruneEvery updates, the peers of closed sessions
// are dropped (applications drop them too).
func (p *Publisher) update(f func()) {
	p.notifiedMu.Lock()
	f()
	p.wakeLocked()
	p.records++
	prune := p.records%pruneEvery == 0
	p.notifiedMu.Unlock()
	if prune {
		p.forgetClosedSessions()
	}
}

// pruneEvery is how many updates go between two prunings of closed
// sessions' peers.
const pruneEvery = 256

// joinedAt notes that ss started at epoch.
func (p *Publisher) joinedAt(ss *mcp.ServerSession, epoch uint64) {
	init := ss.InitializeParams()
	p.update(func() {
		e := p.peerLocked(ss)
		e.started, e.joined = true, epoch
		e.modern = init != nil && init.ProtocolVersion >= modernProtocol
	})
}

// subscribed notes that ss listens for list_changed from epoch on (on
// false, that it stopped): a client that asks for the notification is
// taken to re-list on it until it shows otherwise.
func (p *Publisher) subscribed(ss *mcp.ServerSession, epoch uint64, on bool) {
	p.update(func() {
		e := p.peerLocked(ss)
		if !on {
			e.listening = 0
			return
		}
		e.listening = max(epoch, 1)
		if c := p.clientLocked(ss); c.habit == habitUnknown {
			c.habit = habitRelists
		}
	})
}

// sentTo notes that ss was sent list_changed for epoch.
func (p *Publisher) sentTo(ss *mcp.ServerSession, epoch uint64) {
	p.update(func() {
		e := p.peerLocked(ss)
		e.sent = max(e.sent, epoch)
		if c := p.clientLocked(ss); c != e {
			c.sent = max(c.sent, epoch)
		}
	})
}

// listedBy notes that ss listed the surface of epoch, and whether its
// client has just shown it re-lists, and reports whether the client is
// known to re-list. A per-request session adds no peer: 64 stateless
// clients listing in a loop would pin one each until the next pruning.
func (p *Publisher) listedBy(ss *mcp.ServerSession, epoch uint64) (relists bool) {
	p.update(func() {
		c := p.clientLocked(ss)
		if c.notified > c.listed {
			// It lists after a notification. notified, not sent: a client
			// may re-list before the send returns here.
			c.habit = habitRelists
		}
		c.listed = max(c.listed, epoch)
		relists = c.habit == habitRelists
	})
	return relists
}

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

// adopted reports whether the surface of epoch was adopted (see the
// comment at the top): later changes do not count, so a change is adopted
// once its own notification went out, however busy the session is with
// others.
func (p *Publisher) adopted(caller *mcp.ServerSession, epoch uint64) bool {
	var sessions []*mcp.ServerSession
	for ss := range p.server.Sessions() {
		sessions = append(sessions, ss)
	}
	p.notifiedMu.Lock()
	defer p.notifiedMu.Unlock()
	for _, ss := range sessions {
		if e := p.peers[ss]; e != nil && e.notifiable() && !e.reached(epoch) {
			return false
		}
	}
	return !p.clientLocked(caller).relistPending(epoch)
}

// adopt waits, at most p.adoptWait, until names are adopted, and reports
// whether the caller's client is known to re-list: if its re-list did not
// come within the bound, it is known not to from then on.
func (p *Publisher) adopt(ctx context.Context, caller *mcp.ServerSession, names []string) (relists bool) {
	p.notifiedMu.Lock()
	timer := time.NewTimer(p.adoptWait)
	p.notifiedMu.Unlock()
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
			break
		}
		select {
		case <-wake:
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		if target != 0 && ctx.Err() == nil {
			p.update(func() {
				if c := p.clientLocked(caller); c.relistPending(target) {
					c.habit = habitStatic
				}
			})
		}
		break
	}
	p.notifiedMu.Lock()
	defer p.notifiedMu.Unlock()
	return p.clientLocked(caller).habit == habitRelists
}

// selfChanges is the receiving middleware that follows each client's
// start and subscriptions, routes call_tool, and holds a self-triggered
// result until the change is adopted.
func (p *Publisher) selfChanges(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if ss == nil {
			return next(ctx, method, req)
		}
		switch method {
		case "notifications/initialized", "server/discover":
			res, err := next(ctx, method, req)
			p.joinedAt(ss, p.epoch.Load())
			return res, err
		case "subscriptions/listen":
			// A 2026-07-28 client is notified only while it listens (the
			// request lasts as long as the subscription).
			listen, _ := req.(*mcp.SubscriptionsListenRequest)
			if listen == nil || listen.Params == nil || listen.Params.Notifications == nil || !listen.Params.Notifications.ToolsListChanged {
				return next(ctx, method, req)
			}
			p.subscribed(ss, p.epoch.Load(), true)
			defer p.subscribed(ss, 0, false)
			return next(ctx, method, req)
		case "tools/call":
		default:
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok {
			return next(ctx, method, req)
		}
		if call.Params.Name == toolapi.CallTool {
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
		relists := p.adopt(ctx, ss, change.ToolsAdded)
		p.log.Debug("self-triggered change", "tools_added", change.ToolsAdded, "relists", relists, "waited", time.Since(start))
		if !relists {
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
	Description: "Calls a tool of this session by name: use it for tools added after your tool list was loaded " +
		"(task_add_sources names them, with their input schemas); call other tools directly.",
	InputSchema: json.RawMessage(toolapi.InputSchema[toolapi.CallToolArgs]()),
	Annotations: &mcp.ToolAnnotations{Title: "Call a session tool by name"},
}
