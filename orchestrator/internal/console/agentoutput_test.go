package console_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/executors/fake"
	"github.com/toolscope/toolscope/orchestrator/internal/console"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
)

// printedSecret is a line an agent printed that no scrubber rule knows:
// only the role rule keeps it from a reader.
const printedSecret = "cat notes/prod.txt: the vault unseal phrase is ZEBRA-OCTOPUS-4471"

// printing is the fake backend whose sessions' agent log holds output,
// as a real agentctl's would after the agent printed it.
func printing(output string) *fake.Executor {
	e := fake.New("local")
	e.AgentOutput = output
	return e
}

// agentExitedRow reads a task's events page stream (the rows the events
// page appends) until the agent.exited row, and returns that row.
func agentExitedRow(t *testing.T, c *http.Client, base, taskID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/tasks/"+taskID+"/events/stream", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := bufio.NewScanner(resp.Body)
	var data []string
	for lines.Scan() {
		line := lines.Text()
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, v)
			continue
		}
		if line != "" {
			continue
		}
		if row := strings.Join(data, "\n"); strings.Contains(row, `data-kind="agent.exited"`) {
			return row
		}
		data = nil
	}
	t.Fatalf("the stream ended with no agent.exited row: %v", lines.Err())
	return ""
}

// TestTheEventsPageShowsAViewerNoAgentOutput replays the attack through
// the console: a session's agent prints a secret line and exits. On the
// task's events page a viewer's row says the agent exited, with its code,
// and never the line; the viewer's session page has no trace of it and
// its log is refused. A member's row holds the agent's last output, and a
// member reads it in the session's log.
func TestTheEventsPageShowsAViewerNoAgentOutput(t *testing.T) {
	t.Parallel()
	output := "reading the notes\n" + printedSecret
	exec := printing(output)
	srv, svc, _, _ := consoleOver(t, console.Options{}, service.Options{Executors: map[string]executors.Executor{"local": exec}})
	task, _ := githubTask(t, svc, "acme/api")
	sess, err := svc.LaunchSession(context.Background(), service.SessionInput{TaskID: task.ID, Executor: "local"}, nil)
	require.NoError(t, err)
	svc.SessionEvent(executors.SessionEvent{SessionID: sess.ID, Kind: executors.EventAgentExited, AgentExitCode: 3, AgentOutput: output})

	viewer := browserLike(t)
	logIn(t, viewer, srv.URL, token(t, svc, "vic", model.RoleViewer))
	page := fetch(t, viewer, http.MethodGet, srv.URL+"/tasks/"+task.ID+"/events", nil)
	require.Equal(t, http.StatusOK, page.status)
	row := agentExitedRow(t, viewer, srv.URL, task.ID)
	assert.Contains(t, row, "agent exited with code 3; its output is withheld: reading it (toolscope session logs) needs role member")
	assert.NotContains(t, row, "ZEBRA-OCTOPUS")
	assert.NotContains(t, row, "reading the notes")
	shown := fetch(t, viewer, http.MethodGet, srv.URL+"/sessions/"+sess.ID, nil)
	require.Equal(t, http.StatusOK, shown.status)
	assert.Contains(t, shown.body, "agent exited with code 3", "the session's status says the agent exited")
	assert.NotContains(t, shown.body, "ZEBRA-OCTOPUS")
	assert.Equal(t, http.StatusForbidden, fetch(t, viewer, http.MethodGet, srv.URL+"/sessions/"+sess.ID+"/log", nil).status)

	member := browserLike(t)
	logIn(t, member, srv.URL, token(t, svc, "mia", model.RoleMember))
	assert.Contains(t, agentExitedRow(t, member, srv.URL, task.ID), printedSecret, "a member's row holds the agent's last output")
	log := fetch(t, member, http.MethodGet, srv.URL+"/sessions/"+sess.ID+"/log", nil)
	require.Equal(t, http.StatusOK, log.status)
	assert.Contains(t, log.body, printedSecret, "a member reads the session's log")
}
