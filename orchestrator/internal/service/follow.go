package service

import (
	"context"
	"time"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// followPage is how many committed events the follower reads at a time;
// followRetry is how soon it reads again after a read failed.
const (
	followPage  = 500
	followRetry = time.Second
)

// Follower is how a replica learns what every replica committed to a
// shared database (ADR 0027). Each commit notifies every replica
// (store.FollowCommits); the follower then reads the events committed
// since the last it read, by sequence number, in order, and
//   - publishes them to the broker, so `events watch` on any replica shows
//     every replica's events in order (with a shared store this is the
//     broker's one source: the store's OnCommit only nudges the follower);
//   - wakes the reconciler for this replica's running sessions of each task
//     that a batch changed, and for all of them when the catalog generation
//     moved, so a batch committed through replica A reaches the sessions of
//     replica B;
//   - delivers each lifecycle prompt to this replica's sessions of its task
//     (the poller runs on one replica; each owner delivers to its own).
type Follower struct {
	s       *Service
	nudge   chan struct{}
	last    uint64 // the last sequence number read
	catalog uint64 // the catalog generation last seen
}

// NewFollower returns the service's follower, starting after the events
// and catalog generation committed so far.
func (s *Service) NewFollower(ctx context.Context) (*Follower, error) {
	f := &Follower{s: s, nudge: make(chan struct{}, 1)}
	var err error
	if f.last, err = s.store.LastEventSeq(ctx); err != nil {
		return nil, err
	}
	if f.catalog, err = s.store.CatalogGeneration(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// Nudge makes the follower read now; it never blocks (the store's
// OnCommit, after this process's own commits).
func (f *Follower) Nudge() {
	select {
	case f.nudge <- struct{}{}:
	default:
	}
}

// Run follows the database's commits until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	go f.s.store.FollowCommits(ctx, f.Nudge)
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.s.done:
			return
		case <-f.nudge:
		}
		f.catchUp(ctx)
	}
}

// catchUp reads and acts on what was committed since the last read.
func (f *Follower) catchUp(ctx context.Context) {
	s := f.s
	batched := map[string]bool{}
	var prompts []model.Event
	for {
		page, err := s.store.EventsAfter(ctx, f.last, followPage)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "read committed events", "error", err.Error())
				time.AfterFunc(followRetry, f.Nudge) // or sooner, on the next notification
			}
			return
		}
		if len(page) > 0 {
			s.broker.Publish(page)
			f.last = page[len(page)-1].Seq
		}
		for _, e := range page {
			switch e.Kind {
			case model.EventSourcesAdded, model.EventProvidersRecomputed:
				batched[e.TaskID] = true
			case model.EventPrompted:
				prompts = append(prompts, e)
			}
		}
		if len(page) < followPage {
			break
		}
	}
	if gen, err := s.store.CatalogGeneration(ctx); err == nil && gen != f.catalog {
		f.catalog = gen
		if active, err := s.store.ActiveSessions(ctx); err == nil {
			own, _ := s.mine(running(active))
			s.wake(ctx, own)
		}
	}
	for taskID := range batched {
		if sessions, err := s.store.ListSessions(ctx, taskID); err == nil {
			own, _ := s.mine(running(sessions))
			s.wake(ctx, own)
		}
	}
	for _, e := range prompts {
		s.DeliverPrompt(ctx, model.Prompt{TaskID: e.TaskID, Text: e.Message})
	}
}

// wake wakes the reconciler for sessions without waiting for the outcome.
func (s *Service) wake(ctx context.Context, sessions []model.Session) {
	ids := make([]string, len(sessions))
	for i, sess := range sessions {
		ids[i] = sess.ID
	}
	s.reconcile(ctx, ids...)
}
