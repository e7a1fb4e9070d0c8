package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// DefaultPushTimeout bounds the push of a provider set to one session.
const DefaultPushTimeout = 10 * time.Second

// Push is the outcome of pushing a provider set to one session.
type Push struct {
	SessionID string
	Err       error             // nil: applied
	Applied   model.ProviderSet // what the session's agentctl applied
}

// SourcesResult is the outcome of a batch of source additions.
type SourcesResult struct {
	Task   model.Task
	Pushes []Push // one per live session, failed ones included
}

// AddSources attaches a batch of repositories to a task, all or none, then
// recomputes the task's provider set once (one joined query, after the
// commit) and pushes it to every live session of the task in parallel,
// each push bounded by the push timeout. A failed push never undoes the
// batch: that session keeps its old set (a subset, since sources are only
// added) and is marked as needing repair; every failure is reported.
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
// recompute (one joined query, recorded as an event) and the pushes to the
// task's live sessions.
func (s *Service) afterBatch(ctx context.Context, task model.Task, repoIDs []string) (SourcesResult, error) {
	taskID := task.ID
	s.log.InfoContext(ctx, "sources added", "task_id", taskID, "count", len(repoIDs))
	// From here on the batch is committed: finish even if the caller left.
	ctx = context.WithoutCancel(ctx)
	set, err := s.store.TaskProviders(ctx, taskID)
	if err != nil {
		return SourcesResult{Task: task}, err
	}
	if err := s.store.AppendEvents(ctx, model.Event{TaskID: taskID, Kind: model.EventProvidersRecomputed, Providers: set,
		RepositoryIDs: repoIDs, Message: fmt.Sprintf("after a batch of %d: providers %s at generation %d", len(repoIDs), describeSet(set), set.Generation)}); err != nil {
		return SourcesResult{Task: task}, err
	}
	task.Providers = set
	return SourcesResult{Task: task, Pushes: s.pushToLive(ctx, taskID, set)}, nil
}

// pushToLive pushes set to every running session of a task, in parallel.
func (s *Service) pushToLive(ctx context.Context, taskID string, set model.ProviderSet) []Push {
	sessions, err := s.store.ListSessions(ctx, taskID)
	if err != nil {
		return []Push{{Err: err}}
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		pushes = []Push{}
	)
	for _, sess := range sessions {
		if sess.State != model.SessionRunning {
			continue
		}
		wg.Go(func() {
			p := s.push(ctx, sess, set)
			mu.Lock()
			pushes = append(pushes, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	return pushes
}

// push sends set to one session and records the outcome: the applied set
// (never moving back to an older generation when pushes race), or the
// failure and the repair mark.
func (s *Service) push(ctx context.Context, sess model.Session, set model.ProviderSet) Push {
	pushCtx, cancel := context.WithTimeout(ctx, s.pushTimeout)
	res, err := s.ctl.ApplySurface(pushCtx, handleOf(sess), executors.Surface{Providers: set.Set, Generation: set.Generation})
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("the session did not answer within %s", s.pushTimeout)
	}
	if err != nil {
		s.log.WarnContext(ctx, "provider push failed", "session_id", sess.ID, "generation", set.Generation, "error", err.Error())
		_, uerr := s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
			if m.State != model.SessionRunning {
				return nil, errStateChanged // it ended meanwhile: nothing to repair
			}
			m.NeedsRepair, m.StatusMessage = true, "provider push failed: "+err.Error()
			return []model.Event{{Kind: model.EventProvidersPushFailed, Providers: set, Message: err.Error()}}, nil
		})
		if uerr != nil && !errors.Is(uerr, errStateChanged) {
			s.log.ErrorContext(ctx, "record a failed push", "session_id", sess.ID, "error", uerr.Error())
		}
		return Push{SessionID: sess.ID, Err: err}
	}
	applied := model.ProviderSet{Set: res.Applied, Generation: res.Generation}
	catalogGen, catalogErr := s.store.CatalogGeneration(ctx)
	_, err = s.store.UpdateSession(ctx, sess.ID, func(m *model.Session) ([]model.Event, error) {
		if applied.Generation >= m.Pushed.Generation {
			m.Pushed = applied
		}
		if catalogErr == nil && m.Repaired(set.Generation, catalogGen) {
			m.NeedsRepair, m.StatusMessage = false, ""
		}
		msg := fmt.Sprintf("applied generation %d", applied.Generation)
		if !res.Accepted {
			msg = fmt.Sprintf("generation %d was stale; the session applies generation %d", set.Generation, applied.Generation)
		}
		return []model.Event{{Kind: model.EventProvidersPushed, Providers: applied, Message: msg}}, nil
	})
	if err != nil {
		s.log.ErrorContext(ctx, "record a push", "session_id", sess.ID, "error", err.Error())
	}
	return Push{SessionID: sess.ID, Applied: applied}
}

// catchUp pushes the task's current set, and the workspace's external
// tool set, to a running session that is behind them or marked for
// repair; launches racing a batch or a catalog change, and restarts
// between a commit and its pushes, end here.
func (s *Service) catchUp(ctx context.Context, sess model.Session) model.Session {
	if sess.State != model.SessionRunning {
		return sess
	}
	set, err := s.store.TaskProviders(ctx, sess.TaskID)
	if err == nil && (sess.NeedsRepair || sess.Pushed.Generation < set.Generation) {
		s.push(ctx, sess, set)
	}
	// The provider push does not move the external generation, and a stale
	// repair mark here costs at most one idempotent push.
	s.catchUpExternal(ctx, sess)
	if updated, err := s.store.GetSession(ctx, sess.ID); err == nil {
		return updated
	}
	return sess
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
