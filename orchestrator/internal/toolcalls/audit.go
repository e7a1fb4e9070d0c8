package toolcalls

import (
	"context"
	"fmt"
	"time"

	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// auditRecord is what authorizing a call learned for its audit record:
// the session it really is, from the orchestrator's records.
type auditRecord struct {
	taskID, sessionID string
	// claimedTask is the task id a call claimed when it is not its
	// session's.
	claimedTask string
}

// audit records a call, allowed or refused, as a tool.called event on the
// task of the session it came from: the session, the tool, the target
// repository, the outcome code and the duration. The message is
//
//	tool=NAME outcome=CODE duration_ms=N [refused_at=endpoint [suppressed=N]] [claimed_task=ID] [claimed_session=ID: session X on link of session Y] [suppressed_calls=N suppressed_refused=M]
//
// (refused_at=endpoint: the session's MCP endpoint refused the call
// itself and reported it; suppressed: its refusals over the report bound
// since the previous report; suppressed_calls: the session's calls the
// audit's rate did not record one by one since its previous record,
// refused ones among them, auditrate.go) and never holds the arguments; the names and ids a message claims are
// kept only if they are shaped like names (else "(malformed)"), so a
// forged call cannot write free text into the log. A call whose session
// is unknown, and that came on a link carrying no single session, is
// logged instead.
func (d *Dispatcher) audit(ctx context.Context, c Call, a *auditRecord, res Result, took time.Duration) {
	outcome := outcomeOf(res)
	msg := fmt.Sprintf("tool=%s outcome=%s duration_ms=%.3f", shown(c.Tool), outcome, float64(took.Microseconds())/1000)
	if c.Refused != "" {
		msg += " refused_at=endpoint"
		if c.Suppressed > 0 {
			msg += fmt.Sprintf(" suppressed=%d", c.Suppressed)
		}
	}
	if a.claimedTask != "" {
		msg += " claimed_task=" + shown(a.claimedTask)
	}
	taskID, sessionID := a.taskID, a.sessionID
	if res.Code == toolapi.CodeSessionNotOnLink {
		msg += " claimed_session=" + shown(c.SessionID)
		if len(c.LinkSessions) == 1 {
			if real, err := d.store.GetSession(ctx, c.LinkSessions[0]); err == nil {
				taskID, sessionID = real.TaskID, real.ID
				msg += fmt.Sprintf(": session %s on link of session %s", shown(c.SessionID), real.ID)
			}
		}
	}
	if taskID == "" {
		d.log.WarnContext(ctx, "tool call on no known session", "claimed_session", shown(c.SessionID),
			"link_sessions", c.LinkSessions, "tool", shown(c.Tool), "outcome", outcome)
		return
	}
	ok, suppressed, refused := d.auditRate.admit(sessionID, outcome, d.auditRate.clock())
	if !ok {
		return // counted, and said by the session's next record (auditrate.go)
	}
	msg += suppressedNote(suppressed, refused)
	ev := model.Event{TaskID: taskID, Kind: model.EventToolCalled, SessionID: sessionID, Message: msg}
	if res.repository != "" {
		ev.RepositoryIDs = []string{res.repository}
	}
	// The record outlives the call: an agentctl that hangs up after
	// calling does not erase it.
	if err := d.store.AppendEvents(context.WithoutCancel(ctx), ev); err != nil {
		d.log.ErrorContext(ctx, "tool call audit not recorded", "task_id", taskID, "session_id", sessionID,
			"tool", shown(c.Tool), "outcome", outcome, "error", err.Error())
	}
}

// shown is a claimed name or id as the audit record and the log may hold
// it: what a forged call claims never writes free text there.
func shown(v string) string {
	if toolapi.CheckExternalName(v) != nil {
		return malformed
	}
	return v
}

// malformed stands for a claimed name, id or code that is not shaped like
// one.
const malformed = "(malformed)"

// outcomeOf is a result's outcome as the audit record and the metrics
// name it: "ok", or its refusal code.
func outcomeOf(res Result) string {
	if !res.IsError {
		return "ok"
	}
	if res.Code == "" {
		return toolapi.CodeInternal
	}
	return res.Code
}
