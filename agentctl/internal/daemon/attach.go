package daemon

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// ErrOrchestratorUnreachable fails a tool call while no orchestrator holds
// an Attach stream, or when the stream ends before the answer.
var ErrOrchestratorUnreachable = fmt.Errorf("orchestrator unreachable: %w", errdefs.ErrUnavailable)

// hub carries tool calls to the orchestrator over the current Attach
// stream and routes the answers back by call id.
//
// It serves one orchestrator at a time (ADR 0014). An orchestrator is
// named by the id its hello carries, its installation's identity: the
// same after a restart, different for a copy of its database elsewhere.
// A stream of the attached orchestrator replaces its earlier one (the
// earlier one is stale: its orchestrator reconnected); another
// orchestrator is refused while one is attached, and while agentctl hosts
// sessions its owner attached to.
type hub struct {
	mu      sync.Mutex
	current *link
	nextID  uint64
	// owner is the orchestrator that last attached: the sessions hosted
	// are its.
	owner string
}

// holder describes the orchestrator of an Attach stream, for refusals.
type holder struct {
	id    string // the hello's orchestrator_id
	from  string // the peer's address
	since time.Time
}

func (o holder) String() string {
	return fmt.Sprintf("%q (from %s since %s)", o.id, o.from, o.since.UTC().Format(time.RFC3339))
}

// ErrAttachedElsewhere refuses an Attach while another orchestrator holds
// agentctl; the message names the holder.
var ErrAttachedElsewhere = fmt.Errorf("agentctl serves another orchestrator: %w", errdefs.ErrFailedPrecondition)

// ErrOwnedElsewhere refuses an Attach from an orchestrator other than
// the one whose sessions agentctl hosts, attached or not: a copy of an
// installation's database must not take over the original's sessions.
var ErrOwnedElsewhere = fmt.Errorf("agentctl hosts another orchestrator's sessions: %w", errdefs.ErrPermissionDenied)

// claim attaches send as o's stream unless another orchestrator owns the
// hosted sessions (ErrOwnedElsewhere) or holds agentctl
// (ErrAttachedElsewhere); hosted counts the sessions.
func (h *hub) claim(o holder, hosted int, send func(*agentctlv1.AttachResponse) error) (*link, error) {
	return h.swap(o, send, func(cur *link) error {
		return h.refuseLocked(o.id, hosted, "is refused")
	})
}

// refuseLocked is the one rule of ADR 0014, for an Attach (claim) and
// every other call (admit) of orchestrator id: refused while another
// owns the hosted sessions, attached or not, then while another is
// attached. what says what is refused, for the message.
func (h *hub) refuseLocked(id string, hosted int, what string) error {
	cur := h.current
	if h.owner != "" && h.owner != id && hosted > 0 {
		state := "not attached now"
		if cur != nil {
			state = "attached " + cur.holder.String()
		}
		return fmt.Errorf("%w: its %d session(s) belong to orchestrator %q (%s); orchestrator %q %s "+
			"(a copy of that installation's database? see docs/operations.md, restoring a backup)", ErrOwnedElsewhere, hosted, h.owner, state, id, what)
	}
	if cur != nil && cur.holder.id != id {
		return fmt.Errorf("%w: orchestrator %s holds it; orchestrator %q %s until it detaches", ErrAttachedElsewhere, cur.holder, id, what)
	}
	return nil
}

// admit refuses a call from orchestrator id as claim refuses its
// Attach; hosted counts the sessions.
func (h *hub) admit(id string, hosted int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refuseLocked(id, hosted, "is refused its calls")
}

// attach makes send the stream tool calls go to, replacing (and failing
// the pending calls of) any previous one, whoever held it.
func (h *hub) attach(send func(*agentctlv1.AttachResponse) error) *link {
	l, _ := h.swap(holder{}, send, func(*link) error { return nil })
	return l
}

// swap makes send o's stream if allow, called under the hub's lock with
// the current stream, lets it; the replaced stream's pending calls fail.
func (h *hub) swap(o holder, send func(*agentctlv1.AttachResponse) error, allow func(current *link) error) (*link, error) {
	h.mu.Lock()
	if err := allow(h.current); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	l := &link{
		holder: o, send: send, pending: map[string]chan *agentctlv1.ToolResult{},
		events: make(chan *agentctlv1.AttachResponse, eventQueue), done: make(chan struct{}),
	}
	old := h.current
	h.current, h.owner = l, o.id
	h.mu.Unlock()
	go l.sendEvents()
	if old != nil {
		h.detach(old)
	}
	return l, nil
}

// eventQueue is how many session events and refusal reports may wait for
// a slow orchestrator before new ones are dropped; they never hold up RPCs
// or tool calls.
const eventQueue = 256

// link is one Attach stream.
type link struct {
	holder  holder
	send    func(*agentctlv1.AttachResponse) error
	sendMu  sync.Mutex
	pending map[string]chan *agentctlv1.ToolResult // guarded by hub.mu
	events  chan *agentctlv1.AttachResponse        // session events and refusal reports, which have no answer
	dropped int                                    // events dropped because the queue was full; guarded by hub.mu
	done    chan struct{}
}

// detach ends l: its pending calls fail with ErrOrchestratorUnreachable.
func (h *hub) detach(l *link) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == l {
		h.current = nil
	}
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	clear(l.pending)
}

// deliver hands a result to the call waiting for it.
func (h *hub) deliver(l *link, r *agentctlv1.ToolResult) {
	h.mu.Lock()
	ch, ok := l.pending[r.GetCallId()]
	delete(l.pending, r.GetCallId())
	h.mu.Unlock()
	if ok {
		ch <- r
	}
}

// call sends a tool call and waits for its result, ctx, or the stream's end.
func (h *hub) call(ctx context.Context, c *agentctlv1.ToolCall) (r *agentctlv1.ToolResult, err error) {
	ctx, span := traceAttach(ctx, c)
	defer func() { endAttach(span, r, err) }()
	h.mu.Lock()
	l := h.current
	if l == nil {
		h.mu.Unlock()
		return nil, ErrOrchestratorUnreachable
	}
	h.nextID++
	c.CallId = strconv.FormatUint(h.nextID, 10)
	ch := make(chan *agentctlv1.ToolResult, 1)
	l.pending[c.CallId] = ch
	h.mu.Unlock()
	forget := func() {
		h.mu.Lock()
		delete(l.pending, c.CallId)
		h.mu.Unlock()
	}

	if err := l.sendMsg(&agentctlv1.AttachResponse{Message: &agentctlv1.AttachResponse_ToolCall{ToolCall: c}}); err != nil {
		forget()
		return nil, fmt.Errorf("%w: %v", ErrOrchestratorUnreachable, err)
	}
	select {
	case r := <-ch:
		return r, nil
	case <-l.done:
		return nil, ErrOrchestratorUnreachable
	case <-ctx.Done():
		forget()
		return nil, context.Cause(ctx)
	}
}

// event queues a session event for the attached orchestrator, if any. It
// never blocks; it reports false when the event was dropped.
func (h *hub) event(e *agentctlv1.SessionEvent) bool {
	return h.queue(&agentctlv1.AttachResponse{Message: &agentctlv1.AttachResponse_SessionEvent{SessionEvent: e}})
}

// refused queues the report of a call refused here, as event queues an
// event.
func (h *hub) refused(r *agentctlv1.ToolRefused) bool {
	return h.queue(&agentctlv1.AttachResponse{Message: &agentctlv1.AttachResponse_ToolRefused{ToolRefused: r}})
}

func (h *hub) queue(m *agentctlv1.AttachResponse) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == nil {
		return false
	}
	select {
	case h.current.events <- m:
		return true
	default:
		h.current.dropped++
		return false
	}
}

// sendEvents drains the event queue onto the stream until the link ends.
func (l *link) sendEvents() {
	for {
		select {
		case <-l.done:
			return
		case m := <-l.events:
			if l.sendMsg(m) != nil {
				return
			}
		}
	}
}

func (l *link) sendMsg(m *agentctlv1.AttachResponse) error {
	l.sendMu.Lock()
	defer l.sendMu.Unlock()
	select {
	case <-l.done:
		return ErrOrchestratorUnreachable
	default:
	}
	return l.send(m)
}
