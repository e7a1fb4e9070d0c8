package service

import (
	"bytes"
	"context"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// maxLogLine bounds how much of a line without a newline is held back
// before it is sent anyway (scrubbed as it is).
const maxLogLine = 64 << 10

// SessionLog names a log of a session.
type SessionLog int

// Session logs.
const (
	// LogAgent is the agent's output, read from the session's agentctl
	// wherever it runs (through the Controller); running sessions only.
	LogAgent SessionLog = iota
	// LogAgentctl is the session's agentctl's own log, kept by executors
	// that can (executors.AgentctlLogReader), whatever the session's state.
	LogAgentctl
)

// ReadSessionLog sends a session's log to send, scrubbed line by line
// (store.Scrub): its last 1 MiB, then, with follow, what is written until
// the agent (or agentctl) ends, the session stops or ctx ends.
func (s *Service) ReadSessionLog(ctx context.Context, id string, log SessionLog, follow bool, send func(string) error) error {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return err
	}
	exec, err := s.executor(sess.Executor)
	if err != nil {
		return err
	}
	var read func(ctx context.Context, h executors.Handle, follow bool, fn func([]byte) error) error
	switch log {
	case LogAgentctl:
		reader, ok := exec.(executors.AgentctlLogReader)
		if !ok {
			return errdefs.FailedPrecondition("the %s executor keeps no agentctl log per session (a remote daemon's log is its host's); read the agent's log instead", sess.Executor)
		}
		if len(sess.Handle.State) == 0 {
			return errdefs.FailedPrecondition("session %s never started an agentctl", id)
		}
		read = reader.AgentctlLog
	default:
		if sess.State != model.SessionRunning {
			return errdefs.FailedPrecondition("session %s is %s: its agentctl, which serves the agent's log, no longer runs", id, sess.State)
		}
		read = s.ctl.AgentLog
	}
	var pending []byte
	flush := func(all bool) error {
		end := bytes.LastIndexByte(pending, '\n') + 1
		if all || len(pending) > maxLogLine {
			end = len(pending)
		}
		if end == 0 {
			return nil
		}
		text := s.store.Scrub(string(pending[:end]))
		pending = append(pending[:0], pending[end:]...)
		return send(text)
	}
	err = read(ctx, handleOf(sess), follow, func(b []byte) error {
		pending = append(pending, b...)
		return flush(false)
	})
	if err != nil {
		return err
	}
	return flush(true)
}
