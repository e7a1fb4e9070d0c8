package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
)

// stalled is an Attach stream whose Send never returns until released:
// an orchestrator that stopped reading.
type stalled struct {
	release chan struct{}
	sends   chan *agentctlv1.AttachResponse
}

func (s *stalled) send(m *agentctlv1.AttachResponse) error {
	s.sends <- m
	<-s.release
	return nil
}

func TestEventsNeverBlockOnAStalledStream(t *testing.T) {
	t.Parallel()
	var h hub
	s := &stalled{release: make(chan struct{}), sends: make(chan *agentctlv1.AttachResponse, 1)}
	l := h.attach(s.send)
	defer func() { close(s.release); h.detach(l) }()

	done := make(chan int)
	go func() {
		delivered := 0
		for range 3 * eventQueue {
			if h.event(&agentctlv1.SessionEvent{SessionId: "s"}) {
				delivered++
			}
		}
		done <- delivered
	}()
	select {
	case delivered := <-done:
		// One event is stuck in Send, eventQueue wait behind it, the rest
		// are dropped.
		assert.LessOrEqual(t, delivered, eventQueue+1)
		assert.Positive(t, delivered)
	case <-time.After(time.Minute):
		t.Fatal("hub.event blocked behind a stalled stream")
	}
	<-s.sends // the sender goroutine did try to send

	h.mu.Lock()
	dropped := l.dropped
	h.mu.Unlock()
	assert.Positive(t, dropped, "overflow is counted")
}

func TestCallsFailFastWithoutAStreamAndWhenItEnds(t *testing.T) {
	t.Parallel()
	var h hub
	_, err := h.call(context.Background(), &agentctlv1.ToolCall{ToolName: "task_info"})
	require.ErrorIs(t, err, ErrOrchestratorUnreachable)

	sent := make(chan *agentctlv1.AttachResponse, 1)
	l := h.attach(func(m *agentctlv1.AttachResponse) error { sent <- m; return nil })
	result := make(chan error, 1)
	go func() {
		_, err := h.call(context.Background(), &agentctlv1.ToolCall{ToolName: "task_info"})
		result <- err
	}()
	<-sent
	h.detach(l) // the orchestrator went away mid-call
	select {
	case err := <-result:
		assert.ErrorIs(t, err, ErrOrchestratorUnreachable)
	case <-time.After(time.Minute):
		t.Fatal("a pending call outlived its stream")
	}

	// A newer stream replaces an older one; answers route by call id.
	first := h.attach(func(*agentctlv1.AttachResponse) error { return nil })
	second := h.attach(func(m *agentctlv1.AttachResponse) error { sent <- m; return nil })
	select {
	case <-first.done:
	default:
		t.Fatal("the replaced stream was not ended")
	}
	go func() {
		m := <-sent
		h.deliver(second, &agentctlv1.ToolResult{CallId: m.GetToolCall().GetCallId(), Text: "answer"})
	}()
	r, err := h.call(context.Background(), &agentctlv1.ToolCall{ToolName: "task_info"})
	require.NoError(t, err)
	assert.Equal(t, "answer", r.GetText())
}
