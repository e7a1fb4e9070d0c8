package service

import (
	"context"

	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// backlogPage is how many stored events WatchTaskEvents reads at a time.
const backlogPage = 500

// WatchTaskEvents calls send with every event of a task after afterSeq:
// first the stored backlog, then each event as it is committed, in
// sequence order with no gaps and no repeats, until ctx ends (nil), send
// fails, or the watcher falls behind (events.ErrLagged).
//
// Every reader of events (the API's WatchTaskEvents, the console's events
// page) reads them here, as the caller in ctx (model.ActorFrom) may: the
// agent's output an agent.exited event records only if the caller's role
// may read the session's log (Options.AgentOutputRole, which the server
// wires from the access table: access.MayReadAgentOutput); otherwise, and
// for a caller ctx does not name, without it (withoutAgentOutput).
func (s *Service) WatchTaskEvents(ctx context.Context, taskID string, afterSeq uint64, send func(model.Event) error) error {
	if err := required("task_id", taskID); err != nil {
		return err
	}
	if a, ok := model.ActorFrom(ctx); !ok || !a.Role.AtLeast(s.agentOutputRole) {
		all := send
		send = func(e model.Event) error { return all(withoutAgentOutput(e, s.agentOutputRole)) }
	}
	// Subscribe before reading the backlog, so nothing committed in
	// between is missed; events seen in both are skipped by sequence.
	sub := s.broker.Subscribe(taskID, 0)
	defer sub.Close()
	last := afterSeq
	for {
		page, err := s.store.Events(ctx, taskID, last, backlogPage)
		if err != nil {
			return err
		}
		for _, e := range page {
			if err := send(e); err != nil {
				return err
			}
			last = e.Seq
		}
		if len(page) < backlogPage {
			break
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.done:
			return ErrShuttingDown
		case e, ok := <-sub.Events():
			if !ok {
				return sub.Err()
			}
			if e.Seq <= last {
				continue
			}
			if err := send(e); err != nil {
				return err
			}
			last = e.Seq
		}
	}
}
