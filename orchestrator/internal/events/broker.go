// Package events fans committed task events out to live watchers. The
// store hands every committed batch to Broker.Publish in sequence order;
// each Subscription receives the events of one task without ever blocking
// the publisher. A watcher that falls behind is cut off with ErrLagged and
// resumes from its last sequence number, reading the backlog from the
// store.
package events

import (
	"fmt"
	"sync"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// ErrLagged ends a subscription whose buffer filled up. It is an
// errdefs.ErrUnavailable: the watcher may subscribe again.
var ErrLagged = fmt.Errorf("event watcher fell behind: %w", errdefs.ErrUnavailable)

// DefaultBuffer is the number of events a subscription holds before it
// is cut off.
const DefaultBuffer = 256

// Broker delivers published events to subscriptions. The zero value is
// ready to use.
type Broker struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// Subscription receives the events of one task.
type Subscription struct {
	b      *Broker
	taskID string
	ch     chan model.Event
	err    error // set before ch is closed
}

// Subscribe returns a subscription to taskID's events with room for
// buffer pending events (DefaultBuffer if buffer <= 0).
func (b *Broker) Subscribe(taskID string, buffer int) *Subscription {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	s := &Subscription{b: b, taskID: taskID, ch: make(chan model.Event, buffer)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[*Subscription]struct{}{}
	}
	b.subs[s] = struct{}{}
	return s
}

// Publish delivers events to the subscriptions of their tasks. It never
// blocks: a subscription without room is closed with ErrLagged.
func (b *Broker) Publish(events []model.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		for _, e := range events {
			if e.TaskID != s.taskID {
				continue
			}
			select {
			case s.ch <- e:
			default:
				s.closeLocked(ErrLagged)
			}
			if s.err != nil {
				break
			}
		}
	}
}

// Events returns the channel the subscription's events arrive on. It is
// closed when the subscription ends; Err then says why.
func (s *Subscription) Events() <-chan model.Event { return s.ch }

// Err returns why the subscription ended: ErrLagged, or nil after Close.
// It is only meaningful once Events is closed.
func (s *Subscription) Err() error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.err
}

// Close ends the subscription. It is safe to call more than once.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.closeLocked(nil)
}

func (s *Subscription) closeLocked(err error) {
	if _, ok := s.b.subs[s]; !ok {
		return
	}
	delete(s.b.subs, s)
	s.err = err
	close(s.ch)
}
