package service

import (
	"context"
	"fmt"
	"time"

	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// DefaultPushTimeout bounds the push of a provider set to one session.
const DefaultPushTimeout = 10 * time.Second

// SourcesResult is the outcome of a batch of source additions.
type SourcesResult struct {
	Task   model.Task
	Pushes []Push // one per live session, failed ones included
}

// AddSources attaches a batch of repositories to a task, all or none (the
// store recomputes the task's provider set once, in the batch's
// transaction), then wakes the reconciler for every running session of
// the task and reports each one's outcome, waiting for it within the push
// timeout. A failed push never undoes the batch: that session keeps its
// old set (a subset, since sources are only added), needs repair, and the
// reconciler retries it; every failure is reported.
func (s *Service) AddSources(ctx context.Context, taskID string, repoIDs []string) (SourcesResult, error) {
	if err := validateBatch(taskID, repoIDs); err != nil {
		return SourcesResult{}, err
	}
	task, err := s.store.AddSources(ctx, taskID, repoIDs, actorOf(ctx))
	if err != nil {
		return SourcesResult{}, err
	}
	return s.afterBatch(ctx, task, repoIDs)
}

// afterBatch is what follows a committed batch, whoever made it: the
// task's running sessions are brought to its new provider set.
func (s *Service) afterBatch(ctx context.Context, task model.Task, repoIDs []string) (SourcesResult, error) {
	s.log.InfoContext(ctx, "sources added", "task_id", task.ID, "count", len(repoIDs), "generation", task.Providers.Generation)
	// From here on the batch is committed: finish even if the caller left.
	ctx = context.WithoutCancel(ctx)
	// The set the batch's transaction computed, recorded as is: no second
	// recompute.
	set := task.Providers
	if err := s.store.AppendEvents(ctx, model.Event{TaskID: task.ID, Kind: model.EventProvidersRecomputed, Providers: set, RepositoryIDs: repoIDs,
		Message: fmt.Sprintf("after a batch of %d: providers %s at generation %d", len(repoIDs), describeSet(set), set.Generation)}); err != nil {
		return SourcesResult{Task: task}, err
	}
	sessions, err := s.store.ListSessions(ctx, task.ID)
	if err != nil {
		return SourcesResult{Task: task, Pushes: []Push{{Err: err}}}, nil
	}
	own, others := s.mine(running(sessions))
	if len(others) == 0 {
		return SourcesResult{Task: task, Pushes: s.reconcileAndWait(ctx, own)}, nil
	}
	// Other replicas' sessions are pushed by their owners, woken through
	// the database (ADR 0027); their outcomes arrive as events.
	sub := s.broker.Subscribe(task.ID, 0)
	defer sub.Close()
	pushes := s.reconcileAndWait(ctx, own)
	return SourcesResult{Task: task, Pushes: append(pushes, s.awaitOwners(ctx, sub, set.Generation, others)...)}, nil
}

// awaitOwners waits, at most twice the push timeout, for the owners of
// sessions (other replicas) to push them generation gen or later, and
// returns each one's outcome as its owner recorded it: a providers.pushed
// or providers.push_failed event on sub, or the session's record already
// at gen.
func (s *Service) awaitOwners(ctx context.Context, sub *events.Subscription, gen uint64, sessions []model.Session) []Push {
	out := make([]Push, len(sessions))
	waiting := map[string]int{}
	for i, sess := range sessions {
		out[i] = Push{SessionID: sess.ID, Applied: sess.Applied}
		waiting[sess.ID] = i
		if now, err := s.store.GetSession(ctx, sess.ID); err == nil && now.Applied.Generation >= gen {
			out[i].Applied = now.Applied
			delete(waiting, sess.ID)
		}
	}
	wait := time.NewTimer(2 * s.pushTimeout)
	defer wait.Stop()
	for len(waiting) > 0 {
		select {
		case e, ok := <-sub.Events():
			if !ok {
				return out // lagged or closing: the records tell the rest
			}
			i, ok := waiting[e.SessionID]
			if !ok || e.Providers.Generation < gen {
				continue
			}
			switch e.Kind {
			case model.EventProvidersPushed:
				out[i].Applied = e.Providers
			case model.EventProvidersPushFailed:
				out[i].Err = fmt.Errorf("pushed by replica %s: %s", sessions[i].Owner, e.Message)
			default:
				continue
			}
			delete(waiting, e.SessionID)
		case <-wait.C:
			for id, i := range waiting {
				out[i].Err = fmt.Errorf("session %s is owned by replica %s, which did not report a push of generation %d within %s",
					id, sessions[i].Owner, gen, 2*s.pushTimeout)
			}
			return out
		case <-ctx.Done():
			return out
		case <-s.done:
			return out
		}
	}
	return out
}

// DeliverPrompt offers a stored prompt to the MCP clients of every running
// session of its task. The prompt
// stays in the task's inbox either way, for the agent or the next session.
func (s *Service) DeliverPrompt(ctx context.Context, p model.Prompt) {
	sessions, err := s.store.ListSessions(ctx, p.TaskID)
	if err != nil {
		return
	}
	text := p.Text + " (call task_inbox to acknowledge)"
	for _, sess := range sessions {
		if sess.State != model.SessionRunning || !s.owns(sess) {
			continue // another replica's session: its owner delivers it (ADR 0027)
		}
		notifyCtx, cancel := context.WithTimeout(ctx, s.pushTimeout)
		offered, err := s.ctl.Notify(notifyCtx, handleOf(sess), text)
		cancel()
		if err != nil {
			s.log.WarnContext(ctx, "prompt not delivered live", "session_id", sess.ID, "error", err.Error())
			continue
		}
		s.log.InfoContext(ctx, "prompt delivered", "session_id", sess.ID, "clients", offered)
	}
}
