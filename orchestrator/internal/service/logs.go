package service

import (
	"bytes"
	"context"
	"fmt"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// maxLogLine bounds how much of a line without a newline is held back
// before it is sent anyway (scrubbed as it is).
const maxLogLine = 64 << 10

// ReadSessionLog sends a running session's agent log to send, scrubbed line
// by line (store.Scrub): its last 1 MiB, then, with follow, what the agent
// writes until it exits, the session stops or ctx ends. It reads the log
// from the session's agentctl, wherever the session runs.
func (s *Service) ReadSessionLog(ctx context.Context, id string, follow bool, send func(string) error) error {
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		return err
	}
	if sess.State != model.SessionRunning {
		return errdefs.FailedPrecondition("session %s is %s: its agentctl, which serves the log, no longer runs", id, sess.State)
	}
	exec, err := s.executor(sess.Executor)
	if err != nil {
		return err
	}
	reader, ok := exec.(executors.AgentLogReader)
	if !ok {
		return fmt.Errorf("the %s executor cannot read agent logs: %w", sess.Executor, errdefs.ErrUnimplemented)
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
	err = reader.AgentLog(ctx, handleOf(sess), follow, func(b []byte) error {
		pending = append(pending, b...)
		return flush(false)
	})
	if err != nil {
		return err
	}
	return flush(true)
}
