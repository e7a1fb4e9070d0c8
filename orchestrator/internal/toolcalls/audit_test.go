package toolcalls

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/benchstats"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestEveryCallIsAudited: every call, allowed or refused, is a tool.called
// event on the task of the session it really came from — the session, the
// tool, the target repository, the outcome code and the duration — and
// never carries the arguments' text; a call on a link that does not carry
// its session is recorded on the link's session's task.
func TestEveryCallIsAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	otherTask, err := f.st.CreateTask(ctx, model.Task{WorkspaceID: f.ws.ID, Title: "other"}, f.github.ID)
	require.NoError(t, err)
	otherSession, err := f.st.CreateSession(ctx, model.Session{TaskID: otherTask.ID, Executor: "local", Mode: model.ModeTask, State: model.SessionRunning})
	require.NoError(t, err)
	plan, err := f.st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModePlan, State: model.SessionRunning})
	require.NoError(t, err)

	const freeText = "ARGUMENT-FREE-TEXT-never-recorded"
	args := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	type want struct{ session, tool, outcome, repo, extra string }
	var wants []want

	require.False(t, f.call("task_info", nil).IsError)
	wants = append(wants, want{f.session.ID, "task_info", "ok", "", ""})
	r := f.call(toolapi.GitHubPRCreate, map[string]any{"repository_id": f.github.ID, "branch": "fix-login", "title": freeText, "body": freeText})
	require.False(t, r.IsError, "%s: %s", r.Code, r.Text)
	wants = append(wants, want{f.session.ID, toolapi.GitHubPRCreate, "ok", f.github.ID, ""})
	r = f.callAs(plan.ID, f.task.ID, toolapi.GitHubPRReply, args(map[string]any{"thread_id": "1", "body": freeText}))
	require.Equal(t, toolapi.CodeReadOnlySession, r.Code)
	wants = append(wants, want{plan.ID, toolapi.GitHubPRReply, toolapi.CodeReadOnlySession, "", ""})
	r = f.callAs(f.session.ID, otherTask.ID, "task_info", nil)
	require.Equal(t, toolapi.CodePermissionDenied, r.Code)
	wants = append(wants, want{f.session.ID, "task_info", toolapi.CodePermissionDenied, "", " claimed_task=" + otherTask.ID})
	r = f.callOffLink(otherSession.ID, otherTask.ID, toolapi.GitHubPRReply, args(map[string]any{"thread_id": "1", "body": freeText}), f.session.ID)
	require.Equal(t, toolapi.CodeSessionNotOnLink, r.Code)
	wants = append(wants, want{f.session.ID, toolapi.GitHubPRReply, toolapi.CodeSessionNotOnLink, "",
		" claimed_session=" + otherSession.ID + ": session " + otherSession.ID + " on link of session " + f.session.ID})
	r = f.callAs(f.session.ID, f.task.ID, "ghp_"+freeText+" with spaces", nil)
	require.Equal(t, toolapi.CodeUnknownTool, r.Code)
	wants = append(wants, want{f.session.ID, "(malformed)", toolapi.CodeUnknownTool, "", ""})
	// Calls the MCP endpoint refused itself, reported: recorded with the
	// code they were refused with, the tool's name only if shaped like one,
	// a code the dispatcher does not know as malformed, and never
	// dispatched, even a report naming a tool that would answer.
	report := func(c Call) Result {
		r := f.d.Handle(context.Background(), c)
		require.True(t, r.IsError)
		return r
	}
	r = report(Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: toolapi.GitLabMRStatus, OnLink: true, Refused: toolapi.CodeUnknownTool})
	assert.Equal(t, toolapi.CodeUnknownTool, r.Code)
	wants = append(wants, want{f.session.ID, toolapi.GitLabMRStatus, toolapi.CodeUnknownTool, "", " refused_at=endpoint"})
	r = report(Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: "rm -rf " + freeText, OnLink: true, Refused: toolapi.CodeUnknownTool, Suppressed: 41})
	wants = append(wants, want{f.session.ID, "(malformed)", toolapi.CodeUnknownTool, "", " refused_at=endpoint suppressed=41"})
	r = report(Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: "task_info", OnLink: true, Refused: "ok " + freeText})
	assert.Equal(t, "(malformed)", r.Code, "a report is never a call, whatever it names")
	wants = append(wants, want{f.session.ID, "task_info", "(malformed)", "", " refused_at=endpoint"})
	r = report(Call{SessionID: otherSession.ID, TaskID: otherTask.ID, Tool: "task_info", Refused: toolapi.CodeInvalidArguments, LinkSessions: []string{f.session.ID}})
	assert.Equal(t, toolapi.CodeSessionNotOnLink, r.Code, "a report is bound to its link like a call")
	wants = append(wants, want{f.session.ID, "task_info", toolapi.CodeSessionNotOnLink, "",
		" refused_at=endpoint claimed_session=" + otherSession.ID + ": session " + otherSession.ID + " on link of session " + f.session.ID})
	// A call on a link that carries no session the orchestrator knows is
	// logged: there is no task to record it on.
	r = f.callOffLink(otherSession.ID, otherTask.ID, "task_info", nil)
	require.Equal(t, toolapi.CodeSessionNotOnLink, r.Code)
	assert.Contains(t, f.logs.String(), "tool call on no known session")

	events, err := f.st.Events(ctx, f.task.ID, 0, 1000)
	require.NoError(t, err)
	var audit []model.Event
	for _, e := range events {
		if e.Kind == model.EventToolCalled {
			audit = append(audit, e)
		}
	}
	require.Len(t, audit, len(wants))
	line := regexp.MustCompile(`^tool=(\S+) outcome=(\S+) duration_ms=(\d+\.\d{3})(.*)$`)
	for i, w := range wants {
		e := audit[i]
		m := line.FindStringSubmatch(e.Message)
		require.NotNil(t, m, "message %q", e.Message)
		assert.Equal(t, w.session, e.SessionID, e.Message)
		assert.Equal(t, w.tool, m[1], e.Message)
		assert.Equal(t, w.outcome, m[2], e.Message)
		assert.Equal(t, w.extra, m[4], e.Message)
		if w.repo != "" {
			assert.Equal(t, []string{w.repo}, e.RepositoryIDs)
		} else {
			assert.Empty(t, e.RepositoryIDs)
		}
		assert.NotContains(t, e.Message, "FREE-TEXT")
	}
	others, err := f.st.Events(ctx, otherTask.ID, 0, 1000)
	require.NoError(t, err)
	for _, e := range others {
		assert.NotEqual(t, model.EventToolCalled, e.Kind, "a forged call is recorded where it came from, not on the task it claims")
	}
	testutil.Figure(t, "audit", "%d calls (2 allowed; refused read_only_session, permission_denied, session_not_on_link, unknown_tool; "+
		"4 reports of calls refused at the MCP endpoint, one malformed and one off its link): "+
		"%d tool.called events on the calling session's task with tool, outcome, duration and target repository; "+
		"0 carry argument text; a call on a link of no known session is logged", len(wants), len(audit))
}

// BenchmarkToolCallAudit: a call with its tool.called record (the
// figure) against the same call answered without one (the floor):
// task_info, the cheapest call, so the record's share is the largest it
// gets. The difference is what auditing costs per call.
func BenchmarkToolCallAudit(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	c := Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: "task_info", OnLink: true}
	var figure, floor benchstats.Samples
	for b.Loop() {
		figure.Time(func() {
			if r := f.d.Handle(ctx, c); r.IsError {
				b.Fatal(r.Text)
			}
		})
		floor.Time(func() {
			var a auditRecord
			if r := f.d.handle(ctx, c, &a); r.IsError {
				b.Fatal(r.Text)
			}
		})
	}
	benchstats.Report(b, figure, floor)
	p50, base := figure.Percentile(50), floor.Percentile(50)
	testutil.Figure(b, "audit cost", "task_info with its tool.called record: p50 %s per call; without: %s; the record costs %s per call",
		p50.Round(time.Microsecond), base.Round(time.Microsecond), (p50 - base).Round(time.Microsecond))
}
