package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// Executors are the backend names a session can be launched with.
var Executors = []string{"local", "docker", "remote"}

// SessionInput is a request to launch a session.
type SessionInput struct {
	TaskID       string
	Executor     string
	Mode         model.Mode // "" means model.ModeTask
	AgentArgv    []string
	AgentWorkDir string
}

// ErrNoExecutor reports a launch or resume through an executor backend
// this orchestrator cannot drive.
var ErrNoExecutor = fmt.Errorf("executor backend not available: %w", errdefs.ErrUnavailable)

// LaunchSession validates a launch request and hands it to its executor
// backend. No backend is wired into the orchestrator yet, so a valid
// request is refused with ErrNoExecutor before anything is recorded.
func (s *Service) LaunchSession(ctx context.Context, in SessionInput) (model.Session, error) {
	if err := required("task_id", in.TaskID); err != nil {
		return model.Session{}, err
	}
	if err := checkExecutor(in.Executor); err != nil {
		return model.Session{}, err
	}
	switch in.Mode {
	case "":
		in.Mode = model.ModeTask
	case model.ModeTask, model.ModePlan:
	default:
		return model.Session{}, errdefs.InvalidField("mode", "%q is not a session mode; use task or plan", in.Mode)
	}
	for i, a := range in.AgentArgv {
		if strings.ContainsRune(a, 0) {
			return model.Session{}, errdefs.InvalidField(fmt.Sprintf("agent.argv[%d]", i), "contains a NUL byte")
		}
	}
	if _, err := s.store.TaskProviders(ctx, in.TaskID); err != nil {
		return model.Session{}, err
	}
	return model.Session{}, fmt.Errorf("launch on %q: %w", in.Executor, ErrNoExecutor)
}

// ResumeSession restarts a stopped or failed session through its executor
// backend.
func (s *Service) ResumeSession(ctx context.Context, id string) (model.Session, error) {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	if sess.State == model.SessionRunning {
		return sess, errdefs.FailedPrecondition("session %q is already running", id)
	}
	return sess, fmt.Errorf("resume session %q on %q: %w", id, sess.Executor, ErrNoExecutor)
}

// StopSession stops a session. A session that is not running is returned
// as it is: stopping it again succeeds.
func (s *Service) StopSession(ctx context.Context, id string) (model.Session, error) {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return sess, err
	}
	switch sess.State {
	case model.SessionStopped, model.SessionFailed:
		return sess, nil
	case model.SessionPending:
		stopped, err := s.store.UpdateSession(ctx, id, func(sess *model.Session) ([]model.Event, error) {
			// Checked again inside the transaction: the session may have
			// started since it was read.
			if sess.State != model.SessionPending {
				return nil, errStateChanged
			}
			sess.State = model.SessionStopped
			return []model.Event{{Kind: model.EventSessionEnded, Message: "stopped before it started"}}, nil
		})
		if !errors.Is(err, errStateChanged) {
			return stopped, err
		}
		if sess, err = s.GetSession(ctx, id); err != nil {
			return sess, err
		}
		if sess.State == model.SessionStopped || sess.State == model.SessionFailed {
			return sess, nil
		}
	}
	return sess, fmt.Errorf("stop session %q on %q: %w", id, sess.Executor, ErrNoExecutor)
}

var errStateChanged = errors.New("session state changed")

// GetSession returns one session.
func (s *Service) GetSession(ctx context.Context, id string) (model.Session, error) {
	if err := required("session_id", id); err != nil {
		return model.Session{}, err
	}
	return s.store.GetSession(ctx, id)
}

// ListSessions returns a task's sessions.
func (s *Service) ListSessions(ctx context.Context, taskID string) ([]model.Session, error) {
	if err := required("task_id", taskID); err != nil {
		return nil, err
	}
	return s.store.ListSessions(ctx, taskID)
}

func checkExecutor(name string) error {
	if err := required("executor", name); err != nil {
		return err
	}
	for _, e := range Executors {
		if name == e {
			return nil
		}
	}
	return errdefs.InvalidField("executor", "%q is not an executor; use one of %s", name, strings.Join(Executors, ", "))
}
