package daemon

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
)

// ErrOrchestratorUnreachable fails a tool call while no orchestrator holds
// an Attach stream, or when the stream ends before the answer.
var ErrOrchestratorUnreachable = fmt.Errorf("orchestrator unreachable: %w", errdefs.ErrUnavailable)

// hub carries tool calls to the orchestrator over the current Attach
// stream and routes the answers back by call id.
type hub struct {
	mu      sync.Mutex
	current *link
	nextID  uint64
}

// eventQueue is how many session events may wait for a slow orchestrator
// before new ones are dropped; events never hold up RPCs or tool calls.
const eventQueue = 256

// link is one Attach stream.
type link struct {
	send    func(*agentctlv1.AttachResponse) error
	sendMu  sync.Mutex
	pending map[string]chan *agentctlv1.ToolResult // guarded by hub.mu
	events  chan *agentctlv1.SessionEvent
	dropped int // events dropped because the queue was full; guarded by hub.mu
	done    chan struct{}
}

// attach makes send the stream tool calls go to, replacing (and failing
// the pending calls of) any previous one.
func (h *hub) attach(send func(*agentctlv1.AttachResponse) error) *link {
	l := &link{
		send: send, pending: map[string]chan *agentctlv1.ToolResult{},
		events: make(chan *agentctlv1.SessionEvent, eventQueue), done: make(chan struct{}),
	}
	go l.sendEvents()
	h.mu.Lock()
	old := h.current
	h.current = l
	h.mu.Unlock()
	if old != nil {
		h.detach(old)
	}
	return l
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
func (h *hub) call(ctx context.Context, c *agentctlv1.ToolCall) (*agentctlv1.ToolResult, error) {
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
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == nil {
		return false
	}
	select {
	case h.current.events <- e:
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
		case e := <-l.events:
			if l.sendMsg(&agentctlv1.AttachResponse{Message: &agentctlv1.AttachResponse_SessionEvent{SessionEvent: e}}) != nil {
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
