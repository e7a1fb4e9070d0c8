// Package mcpserver serves a tool registry over MCP with the official
// go-sdk, and keeps what clients see exactly in step with it.
//
// A Publisher owns one *mcp.Server. Publish hands it a new registry
// snapshot; the publisher diffs it against what the SDK serves and applies
// only the difference (the SDK notifies on every AddTool, even of an
// identical tool, so an equivalent snapshot makes no SDK call at all).
// The whole difference is applied under a write lock that tools/list
// requests take for reading, so a listing never sees a half-applied
// change.
//
// One change yields one notifications/tools/list_changed whatever the
// scheduling. The SDK notifies 10 ms after the last AddTool of a burst
// (v1.8 has no call that adds several tools at once), so a publisher
// descheduled for longer between two AddTool calls of one application
// would make it notify twice. Each application that changes the SDK's
// tool set therefore opens an epoch, and a sending middleware lets
// through at most one list_changed per session and epoch. A notification
// that leaves in the middle of an application is the one that counts: a
// client that lists on it waits on the write lock and sees the whole
// change.
//
// The SDK's debounce is trailing-edge with no maximum wait: changes closer
// together than 10 ms would postpone the notification for as long as they
// continue. The publisher therefore applies a change only once the SDK has
// sent the previous application's notification (its debounce fired), or
// MinInterval after that application if no notification leaves (no
// session); the first change of a quiet period goes at once, later ones
// are coalesced into the latest snapshot. Under continuous churn clients
// get a notification about every 10 ms (the debounce), at least every
// MinInterval + 10 ms, and never a second one for one change.
package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolscope/toolscope/internal/registry"
)

// DefaultMinInterval is the most an application waits for the previous
// one's notification to leave (see the package comment).
const DefaultMinInterval = 25 * time.Millisecond

// HandlerFunc returns the handler of the named tool. It is called when the
// tool is published; the handler runs concurrently with other calls.
type HandlerFunc func(tool registry.Tool) mcp.ToolHandler

// Options configure a Publisher.
type Options struct {
	// Name and Version identify the server to clients.
	Name, Version string
	// Instructions are shown to clients at initialization, if set.
	Instructions string
	// Handler supplies each tool's handler.
	Handler HandlerFunc
	// MinInterval bounds how long an application waits for the previous
	// one's notification; DefaultMinInterval if zero.
	MinInterval time.Duration
	// AdoptWait bounds how long a self-triggered change's result waits
	// for the session's clients (adopt.go); DefaultAdoptWait if zero.
	AdoptWait time.Duration
	Logger    *slog.Logger
	// OnListChanged, if set, is called after each
	// notifications/tools/list_changed sent to a client (agentctl's
	// metrics count them).
	OnListChanged func()
	// OnRefused, if set, is told of the tool calls refused here, before
	// they reach the orchestrator (refusals.go), and reports whether it
	// delivered the report.
	OnRefused func(context.Context, Refusal) bool
	// RefusalReports bounds the calls of OnRefused a second (the
	// endpoint's Limits.RefusalReports); DefaultRefusalReports if zero.
	RefusalReports int
}

// Publisher serves registries through one go-sdk server.
type Publisher struct {
	server  *mcp.Server
	handler HandlerFunc
	every   time.Duration
	log     *slog.Logger

	// listMu is held for writing while the SDK's tool set changes and for
	// reading by every tools/list request.
	listMu    sync.RWMutex
	published *registry.Registry // what the SDK serves; guarded by listMu
	// epoch counts the applications that changed the SDK's tool set; it
	// moves only under listMu's write lock.
	epoch atomic.Uint64
	// released is the latest epoch whose list_changed the SDK has sent to
	// some session: its debounce timer has fired, so the next application
	// need not wait out MinInterval.
	released atomic.Uint64

	notifiedMu sync.Mutex
	// peers holds what adoption knows of each session (adopt.go), and
	// stateless of a stateless client's per-request sessions; wake is
	// closed and replaced whenever one of them or the published registry
	// moves.
	peers         map[*mcp.ServerSession]*peer
	stateless     peer
	wake          chan struct{}
	records       int           // updates since the start, for pruning
	adoptWait     time.Duration // read under notifiedMu (tests change it)
	onListChanged func()
	refusals      *refusals // nil without Options.OnRefused

	mu              sync.Mutex
	desired         *registry.Registry // the latest snapshot handed to Publish
	lastApply       time.Time
	timer           *time.Timer // pending coalesced apply, if any
	closed          bool
	applied         func(*registry.Registry) // test hook: after each application
	betweenSDKCalls func()                   // test hook: between two SDK calls of an application
}

// New returns a publisher serving initial.
func New(initial *registry.Registry, opts Options) *Publisher {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinInterval
	}
	if opts.AdoptWait <= 0 {
		opts.AdoptWait = DefaultAdoptWait
	}
	p := &Publisher{handler: opts.Handler, every: opts.MinInterval, log: opts.Logger, peers: map[*mcp.ServerSession]*peer{},
		wake: make(chan struct{}), adoptWait: opts.AdoptWait, onListChanged: opts.OnListChanged,
		refusals: newRefusals(opts.OnRefused, opts.RefusalReports)}
	p.server = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Instructions: opts.Instructions,
		Logger:       opts.Logger,
		// No ServerOptions.KeepAlive: the Endpoint pings (see keepAlive).
		// Advertised explicitly: an inferred capability is absent while the
		// tool set is empty, and a 2026-07-28 client that connects then
		// never subscribes to list_changed.
		Capabilities: &mcp.ServerCapabilities{
			Tools:   &mcp.ToolCapabilities{ListChanged: true},
			Logging: &mcp.LoggingCapabilities{}, // prompts arrive as log notifications
		},
	})
	p.server.AddReceivingMiddleware(p.reportRefusals, p.gateListing, p.selfChanges)
	p.server.AddSendingMiddleware(p.oneNotificationPerEpoch)
	p.mu.Lock()
	p.desired = initial
	p.applyLocked()
	p.mu.Unlock()
	return p
}

// Notify offers text as a log notification to every connected client (the
// SDK sends it to those that set a log level) and returns how many clients
// it was offered to.
func (p *Publisher) Notify(ctx context.Context, text string) int {
	sent := 0
	for ss := range p.server.Sessions() {
		if ss.Log(ctx, &mcp.LoggingMessageParams{Level: "notice", Logger: "toolscope", Data: text}) == nil {
			sent++
		}
	}
	return sent
}

// Server returns the go-sdk server, to connect transports to.
func (p *Publisher) Server() *mcp.Server { return p.server }

// Published returns the registry the SDK serves now.
func (p *Publisher) Published() *registry.Registry {
	p.listMu.RLock()
	defer p.listMu.RUnlock()
	return p.published
}

// Desired returns the latest registry handed to Publish.
func (p *Publisher) Desired() *registry.Registry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.desired
}

// Publish makes r the surface clients see: at once if the previous
// application's notification has left or MinInterval has passed since it,
// else when one of them happens, coalesced with any later snapshot. It reports whether r differs from the previous snapshot; an
// equivalent snapshot changes nothing and notifies no one.
func (p *Publisher) Publish(r *registry.Registry) (changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || r.Equal(p.desired) {
		return false
	}
	p.desired = r
	if p.timer != nil {
		return true // a pending application will pick r up
	}
	if wait := p.every - time.Since(p.lastApply); wait > 0 && p.released.Load() < p.epoch.Load() {
		p.timer = time.AfterFunc(wait, p.flush)
		return true
	}
	p.applyLocked()
	return true
}

// release notes that epoch's notification has left, and runs a pending
// application at once if it waits on that one alone.
func (p *Publisher) release(epoch uint64) {
	for {
		old := p.released.Load()
		if epoch <= old {
			return // another session's send released it
		}
		if p.released.CompareAndSwap(old, epoch) {
			break
		}
	}
	// Not inline: this runs inside the SDK's notification loop, which an
	// application would hold up.
	go func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.timer == nil || p.closed || p.released.Load() < p.epoch.Load() {
			return
		}
		p.timer.Stop()
		p.timer = nil
		p.applyLocked()
	}()
}

func (p *Publisher) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	if !p.closed {
		p.applyLocked()
	}
}

// applyLocked moves the SDK from published to desired. p.mu is held.
func (p *Publisher) applyLocked() {
	target := p.desired
	removed, upserted := target.Diff(p.Published())
	if len(removed) == 0 && len(upserted) == 0 {
		p.listMu.Lock()
		p.published = target
		p.listMu.Unlock()
		return
	}
	// Build everything before taking the lock, so the SDK's tool set
	// changes in one short burst. Only the changed tools are built, and
	// built-in ones only once per process (definitions.go).
	defs := make([]definition, len(upserted))
	handlers := make([]mcp.ToolHandler, len(upserted))
	for i, t := range upserted {
		defs[i] = define(target, t)
		handlers[i] = p.handler(t)
	}
	p.listMu.Lock()
	p.epoch.Add(1)
	calls := 0
	between := func() {
		if calls++; calls > 1 && p.betweenSDKCalls != nil {
			p.betweenSDKCalls()
		}
	}
	if len(removed) > 0 {
		between()
		p.server.RemoveTools(removed...)
	}
	for i := range defs {
		between()
		p.server.AddTool(defs[i].sdk, handlers[i])
	}
	p.published = target
	p.listMu.Unlock()
	p.wakeAll()
	p.forgetClosedSessions()
	p.lastApply = time.Now()
	p.log.Debug("tools published", "removed", removed, "upserted", len(upserted), "total", target.Len())
	if p.applied != nil {
		p.applied(target)
	}
}

// Close stops pending applications. Connected sessions are not closed.
func (p *Publisher) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// oneNotificationPerEpoch lets through at most one
// notifications/tools/list_changed per session for each application that
// changed the tool set (see the package comment). The epoch is read when
// the notification leaves: it was opened under the write lock before the
// change that triggered the notification, so a client that lists on it
// sees that change whole.
func (p *Publisher) oneNotificationPerEpoch(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == notificationToolListChanged {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				epoch := p.epoch.Load()
				p.notifiedMu.Lock()
				e := p.peerLocked(ss)
				seen := e.notified >= epoch
				e.notified = max(e.notified, epoch)
				if c := p.clientLocked(ss); c != e {
					c.notified = max(c.notified, epoch)
				}
				p.notifiedMu.Unlock()
				if seen {
					return nil, nil
				}
				res, err := next(ctx, method, req)
				if err == nil {
					p.sentTo(ss, epoch)
					if p.onListChanged != nil {
						p.onListChanged()
					}
					p.release(epoch)
				}
				return res, err
			}
		}
		return next(ctx, method, req)
	}
}

const notificationToolListChanged = "notifications/tools/list_changed"

// forgetClosedSessions drops the peers of sessions the SDK no longer
// holds.
func (p *Publisher) forgetClosedSessions() {
	live := map[*mcp.ServerSession]bool{}
	for ss := range p.server.Sessions() {
		live[ss] = true
	}
	p.notifiedMu.Lock()
	defer p.notifiedMu.Unlock()
	for ss := range p.peers {
		if !live[ss] {
			delete(p.peers, ss)
		}
	}
}

// gateListing holds listMu for reading around tools/list, notes which
// surface (epoch) each client listed, and offers call_tool to clients not
// known to re-list (adopt.go).
func (p *Publisher) gateListing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/list" {
			return next(ctx, method, req)
		}
		p.listMu.RLock()
		epoch := p.epoch.Load()
		res, err := next(ctx, method, req)
		list, _ := res.(*mcp.ListToolsResult)
		if list != nil {
			for i, t := range list.Tools {
				if full, ok := shown(p.published, t.Name); ok {
					list.Tools[i] = full // the SDK holds a stand-in (definitions.go)
				}
			}
		}
		p.listMu.RUnlock()
		ss, _ := req.GetSession().(*mcp.ServerSession)
		if err != nil || ss == nil {
			return res, err
		}
		if !p.listedBy(ss, epoch) && list != nil && list.NextCursor == "" {
			list.Tools = append(list.Tools, callToolDefinition)
		}
		return res, err
	}
}

func toMCP(t registry.Tool) *mcp.Tool {
	destructive, openWorld := t.Destructive, t.OpenWorld
	var output any
	if len(t.OutputSchema) > 0 {
		output = t.OutputSchema
	}
	return &mcp.Tool{
		Name:         t.Name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		OutputSchema: output,
		Annotations: &mcp.ToolAnnotations{
			Title:           t.Title,
			ReadOnlyHint:    t.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  t.Idempotent,
			OpenWorldHint:   &openWorld,
		},
	}
}

// FromMCP converts a tool a client listed back into a registry entry; the
// stdio bridge mirrors an upstream session with it.
func FromMCP(t *mcp.Tool, inputSchema, outputSchema []byte) registry.Tool {
	out := registry.Tool{
		Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: inputSchema, OutputSchema: outputSchema,
		Group: "mirror",
	}
	if a := t.Annotations; a != nil {
		out.ReadOnly, out.Idempotent = a.ReadOnlyHint, a.IdempotentHint
		out.Destructive = a.DestructiveHint != nil && *a.DestructiveHint
		out.OpenWorld = a.OpenWorldHint != nil && *a.OpenWorldHint
		if out.Title == "" {
			out.Title = a.Title
		}
	}
	return out
}

// probe is a go-sdk server no client ever connects to: Check adds tools to
// it to learn whether the SDK accepts them.
var probe = struct {
	sync.Mutex
	server *mcp.Server
}{server: mcp.NewServer(&mcp.Implementation{Name: "probe"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})}

// Check reports whether the go-sdk accepts t as a tool definition. The SDK
// panics in AddTool on a definition it refuses (an input schema that is
// not a JSON object of type "object", JSON nested too deeply for it, a
// malformed x-mcp-header annotation, ...), so a definition that came from
// outside — an external MCP server's tool — must pass Check before it is
// published: a refusal then is an error for the sender, not a crash of
// every session.
func Check(t registry.Tool) (err error) {
	probe.Lock()
	defer probe.Unlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
		probe.server.RemoveTools(t.Name)
	}()
	probe.server.AddTool(toMCP(t), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, nil
	})
	return nil
}
