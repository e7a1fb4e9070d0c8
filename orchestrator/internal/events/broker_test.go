package events_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

func batch(taskID string, seqs ...uint64) []model.Event {
	var out []model.Event
	for _, s := range seqs {
		out = append(out, model.Event{Seq: s, TaskID: taskID})
	}
	return out
}

func drain(s *events.Subscription) []uint64 {
	var out []uint64
	for {
		select {
		case e, ok := <-s.Events():
			if !ok {
				return out
			}
			out = append(out, e.Seq)
		default:
			return out
		}
	}
}

func TestSubscriptionsGetTheirTaskOnlyInOrder(t *testing.T) {
	t.Parallel()
	var b events.Broker
	a := b.Subscribe("task_a", 0)
	other := b.Subscribe("task_b", 0)
	defer a.Close()
	defer other.Close()

	b.Publish(append(batch("task_a", 1, 2), batch("task_b", 3)...))
	b.Publish(batch("task_a", 4))
	assert.Equal(t, []uint64{1, 2, 4}, drain(a))
	assert.Equal(t, []uint64{3}, drain(other))
}

func TestSlowSubscriberIsCutOffWithoutBlockingThePublisher(t *testing.T) {
	t.Parallel()
	var b events.Broker
	slow := b.Subscribe("task_a", 2)
	fast := b.Subscribe("task_a", 10)
	defer fast.Close()

	b.Publish(batch("task_a", 1, 2, 3)) // does not block although slow holds 2
	got := drain(slow)
	assert.Equal(t, []uint64{1, 2}, got)
	_, open := <-slow.Events()
	require.False(t, open, "the lagging subscription is closed")
	assert.ErrorIs(t, slow.Err(), events.ErrLagged)
	assert.Equal(t, []uint64{1, 2, 3}, drain(fast), "others are unaffected")

	b.Publish(batch("task_a", 4)) // a closed subscription is skipped, not sent to
	slow.Close()                  // closing twice is safe
	assert.NoError(t, fast.Err())
}
