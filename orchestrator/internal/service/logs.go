package service

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/logdir"
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
	// wherever it runs (executors.AgentLogReader); once a session stopped,
	// the copy its executor kept, if it keeps one
	// (executors.KeptAgentLogReader: local).
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
		if kept, ok := exec.(executors.KeptAgentLogReader); ok && sess.State == model.SessionStopped && len(sess.Handle.State) > 0 {
			// Its agentctl no longer runs; the executor kept the log.
			read = func(ctx context.Context, h executors.Handle, _ bool, fn func([]byte) error) error {
				return kept.KeptAgentLog(ctx, h, fn)
			}
			break
		}
		if sess.State != model.SessionRunning {
			return errdefs.FailedPrecondition("session %s is %s: its agentctl, which serves the agent's log, no longer runs, and the %s executor keeps no copy", id, sess.State, sess.Executor)
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

// PruneLogs bounds DataDir/logs, where the local executor keeps each
// session's logs after it stops (Options.Logs): the oldest stopped
// sessions' logs are removed first. A session that is not stopped (it
// runs, or failed and may be resumed) keeps its logs, whatever their age
// and size. It runs at start, after every stop and on a timer (server).
func (s *Service) PruneLogs(ctx context.Context) {
	if s.dataDir == "" {
		return
	}
	dir := filepath.Join(s.dataDir, "logs")
	removed, err := logdir.Prune(dir, s.logs, time.Now(), func(id string) bool {
		sess, err := s.store.GetSession(ctx, id)
		if errors.Is(err, errdefs.ErrNotFound) {
			return false // a launch refused before its session was kept
		}
		return err != nil || sess.State != model.SessionStopped
	})
	if err != nil {
		s.log.WarnContext(ctx, "bounding the sessions' logs", "dir", dir, "error", err)
	}
	if len(removed) > 0 {
		s.log.InfoContext(ctx, "removed the oldest stopped sessions' logs", "dir", dir, "sessions", removed,
			"max_bytes", s.logs.MaxBytes, "max_age", s.logs.MaxAge)
	}
}
