package service

import (
	"context"
	"fmt"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Bounds of hosted sessions (toolscope serve --max-hosted,
// --max-hosted-per-task).
const (
	DefaultMaxHosted        = 64
	DefaultMaxHostedPerTask = 8
)

// HostedLimits bound the hosted sessions running (or starting) at once.
type HostedLimits struct {
	// Total bounds them in all; DefaultMaxHosted if zero.
	Total int
	// PerTask bounds those of one task; DefaultMaxHostedPerTask if zero.
	PerTask int
}

func (l HostedLimits) withDefaults() HostedLimits {
	if l.Total <= 0 {
		l.Total = DefaultMaxHosted
	}
	if l.PerTask <= 0 {
		l.PerTask = DefaultMaxHostedPerTask
	}
	return l
}

// Attached is a hosted session just attached: its record, its MCP URL
// and its bearer token, which is shown this once (only its SHA-256 is
// kept) and revoked when the session stops.
type Attached struct {
	Session     model.Session
	URL         string
	BearerToken string
}

// AttachSession opens a hosted session on a task: the orchestrator serves
// the task's surface at a URL, behind a bearer token of the session's own,
// to an agent that runs elsewhere. The session is recorded like every
// other (listed, inspected, stopped), and the reconciler keeps its surface
// up to date.
func (s *Service) AttachSession(ctx context.Context, taskID string, mode model.Mode) (Attached, error) {
	if err := required("task_id", taskID); err != nil {
		return Attached{}, err
	}
	switch mode {
	case "":
		mode = model.ModeTask
	case model.ModeTask, model.ModePlan:
	default:
		return Attached{}, errdefs.InvalidField("mode", "%q is not a session mode; use task or plan", mode)
	}
	task, err := s.store.GetTask(ctx, taskID)
	if err != nil {
		return Attached{}, err
	}
	exec, err := s.executor(model.ExecutorHosted)
	if err != nil {
		return Attached{}, fmt.Errorf("%w; the hosted endpoint is served with toolscope serve --hosted ADDR", err)
	}
	sess, err := s.recordHosted(ctx, model.Session{TaskID: task.ID, Executor: model.ExecutorHosted, Mode: mode, State: model.SessionPending})
	if err != nil {
		return Attached{}, err
	}
	running, status, err := s.start(ctx, exec, sess, nil, verbLaunched)
	if err != nil {
		return Attached{}, err
	}
	return Attached{Session: running, URL: status.MCPURL, BearerToken: status.MCPToken}, nil
}

// recordHosted records a hosted session unless the bounds are reached:
// the count and the record are made under one lock, so concurrent
// attaches cannot pass a bound together.
func (s *Service) recordHosted(ctx context.Context, sess model.Session) (model.Session, error) {
	s.hostedMu.Lock()
	defer s.hostedMu.Unlock()
	active, err := s.store.ActiveSessions(ctx)
	if err != nil {
		return model.Session{}, err
	}
	total, ofTask := 0, 0
	for _, a := range active {
		if a.Executor != model.ExecutorHosted {
			continue
		}
		total++
		if a.TaskID == sess.TaskID {
			ofTask++
		}
	}
	switch {
	case ofTask >= s.hosted.PerTask:
		return model.Session{}, errdefs.FailedPrecondition("task %s already has %d hosted sessions, the limit (toolscope serve --max-hosted-per-task); "+
			"stop one you no longer use (toolscope session stop)", sess.TaskID, ofTask)
	case total >= s.hosted.Total:
		return model.Session{}, errdefs.FailedPrecondition("this orchestrator already serves %d hosted sessions, the limit (toolscope serve --max-hosted); "+
			"stop one you no longer use (toolscope session stop)", total)
	}
	return s.store.CreateSession(ctx, sess)
}
