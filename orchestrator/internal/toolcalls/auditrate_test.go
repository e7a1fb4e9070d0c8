package toolcalls

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// TestTheAuditIsBoundedPerSessionAndKeepsItsCount (issue 33, item 6): one
// agent calling in a loop wrote a tool.called event for each of ~350
// calls a second. 600 calls of one session in one instant now write at
// most DefaultAuditBurst events, plus one that counts the rest once the
// session is quiet; every call is accounted for (each record is one call,
// plus the suppressed_calls it says), refused ones counted apart; another
// session's calls are not held back by it.
func TestTheAuditIsBoundedPerSessionAndKeepsItsCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	other, err := f.st.CreateSession(ctx, model.Session{TaskID: f.task.ID, Executor: "local", Mode: model.ModePlan, State: model.SessionRunning})
	require.NoError(t, err)
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f.d.auditRate.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	const calls, refusedEvery = 600, 4
	for i := range calls {
		if i%refusedEvery == 0 {
			require.Equal(t, toolapi.CodeUnknownTool, f.call("no_such_tool", nil).Code)
		} else {
			require.False(t, f.call("task_info", nil).IsError)
		}
	}
	require.Equal(t, toolapi.CodeReadOnlySession, f.callAs(other.ID, f.task.ID, toolapi.GitHubPRCreate, nil).Code)
	records := func(session string) []model.Event {
		evs, err := f.st.Events(ctx, f.task.ID, 0, 100_000)
		require.NoError(t, err)
		var out []model.Event
		for _, e := range evs {
			if e.Kind == model.EventToolCalled && e.SessionID == session {
				out = append(out, e)
			}
		}
		return out
	}
	assert.Len(t, records(other.ID), 1, "another session's call is recorded")
	assert.Len(t, records(f.session.ID), DefaultAuditBurst, "at most a burst in one instant")

	f.d.FlushAudit(ctx)
	assert.Len(t, records(f.session.ID), DefaultAuditBurst, "not yet quiet for a second: nothing flushed")
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	f.d.FlushAudit(ctx)

	counted, refused := 0, 0
	note := regexp.MustCompile(`suppressed_calls=(\d+) suppressed_refused=(\d+)`)
	for _, e := range records(f.session.ID) {
		if !strings.HasPrefix(e.Message, "tool=(suppressed)") {
			counted++
			if strings.Contains(e.Message, "outcome="+toolapi.CodeUnknownTool) {
				refused++
			}
		}
		if m := note.FindStringSubmatch(e.Message); m != nil {
			n, _ := strconv.Atoi(m[1])
			r, _ := strconv.Atoi(m[2])
			counted, refused = counted+n, refused+r
		}
	}
	assert.Equal(t, calls, counted, "every call accounted for")
	assert.Equal(t, calls/refusedEvery, refused, "refused ones apart")
	assert.Len(t, records(f.session.ID), DefaultAuditBurst+1, "the rest in one record")

	// Past the burst, the rate: a call a second later is recorded.
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	require.False(t, f.call("task_info", nil).IsError)
	assert.Len(t, records(f.session.ID), DefaultAuditBurst+2)
}
