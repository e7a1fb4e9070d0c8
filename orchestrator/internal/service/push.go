package service

import (
	"context"
	"fmt"
	"time"

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
	return SourcesResult{Task: task, Pushes: s.reconcileAndWait(ctx, running(sessions))}, nil
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
		if sess.State != model.SessionRunning {
			continue
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
