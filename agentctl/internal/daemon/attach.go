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

// link is one Attach stream.
type link struct {
	send    func(*agentctlv1.AttachResponse) error
	sendMu  sync.Mutex
	pending map[string]chan *agentctlv1.ToolResult // guarded by hub.mu
	done    chan struct{}
}

// attach makes send the stream tool calls go to, replacing (and failing
// the pending calls of) any previous one.
func (h *hub) attach(send func(*agentctlv1.AttachResponse) error) *link {
	l := &link{send: send, pending: map[string]chan *agentctlv1.ToolResult{}, done: make(chan struct{})}
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

// event sends a session event if an orchestrator is attached.
func (h *hub) event(e *agentctlv1.SessionEvent) {
	h.mu.Lock()
	l := h.current
	h.mu.Unlock()
	if l != nil {
		_ = l.sendMsg(&agentctlv1.AttachResponse{Message: &agentctlv1.AttachResponse_SessionEvent{SessionEvent: e}})
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
