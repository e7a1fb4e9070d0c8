package toolcalls

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// TestAddSourcesFollowsTheWorkspacePolicy: task_add_sources goes through
// the SourceAdder as the calling session, and the policy's outcomes reach
// the agent as a stable refusal code (deny) or a non-error pending result
// with the request id (approve); an ended session cannot ask at all.
func TestAddSourcesFollowsTheWorkspacePolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	var asked []string
	f.d.SetSourceAdder(func(ctx context.Context, sessionID, taskID string, repoIDs []string) (SourceOutcome, error) {
		actor, _ := model.ActorFrom(ctx)
		asked = append(asked, sessionID, actor.String())
		out, err := f.st.AgentAddSources(ctx, taskID, sessionID, repoIDs)
		return SourceOutcome{Providers: out.Task.Providers, Request: out.Request}, err
	})
	docs, err := f.st.CreateRepository(ctx, model.Repository{WorkspaceID: f.ws.ID, Provider: "local", Path: "/src/docs"})
	require.NoError(t, err)
	args := map[string]any{"repository_ids": []string{docs.ID}}

	_, err = f.st.SetSourcePolicy(ctx, f.ws.ID, model.SourcePolicyDeny, testActor)
	require.NoError(t, err)
	res := f.call("task_add_sources", args)
	require.True(t, res.IsError)
	assert.Equal(t, toolapi.CodeSourceAdditionDenied, res.Code)
	assert.Contains(t, res.Text, docs.ID+" (/src/docs)")
	assert.Contains(t, res.Text, "ask a person")
	assert.Equal(t, []string{f.session.ID, "session:" + f.session.ID}, asked, "the call acts as its session")

	_, err = f.st.SetSourcePolicy(ctx, f.ws.ID, model.SourcePolicyApprove, testActor)
	require.NoError(t, err)
	pending := structured[toolapi.AddSourcesResult](t, f.call("task_add_sources", args))
	assert.True(t, pending.Pending)
	assert.NotEmpty(t, pending.RequestID)
	assert.Equal(t, f.task.Providers.Generation, pending.Generation, "nothing attached yet")
	req, err := f.st.GetSourceRequest(ctx, pending.RequestID)
	require.NoError(t, err)
	assert.Equal(t, "session:"+f.session.ID, req.RequestedBy.String())

	_, err = f.st.UpdateSession(ctx, f.session.ID, func(s *model.Session) ([]model.Event, error) {
		s.State = model.SessionStopped
		return nil, nil
	})
	require.NoError(t, err)
	res = f.call("task_add_sources", args)
	assert.Equal(t, toolapi.CodeSessionEnded, res.Code, "an ended session asks for nothing")
	reqs, err := f.st.ListSourceRequests(ctx, store.SourceRequestFilter{TaskID: f.task.ID})
	require.NoError(t, err)
	assert.Len(t, reqs, 1)
}
