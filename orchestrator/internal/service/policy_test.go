package service_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the driver of the fault injected below

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
	"github.com/toolscope/toolscope/orchestrator/internal/textlimit"
)

// policyWorld is a workspace with a GitHub task, a GitLab and a local
// repository it could attach, a session of the task, and a second
// workspace whose repository no agent of the first may ask for.
type policyWorld struct {
	svc                   *service.Service
	st                    *store.Store
	ws                    model.Workspace
	task                  model.Task
	session               string
	gitlab, local, others model.Repository
}

var alice = model.Actor{Kind: model.ActorPerson, Name: "alice", Role: model.RoleMember}

func newPolicyWorld(t *testing.T) policyWorld {
	t.Helper()
	ctx := context.Background()
	w := policyWorld{}
	w.svc, w.st = newServiceAndStore(t)
	var err error
	w.ws, err = w.svc.CreateWorkspace(ctx, "acme")
	require.NoError(t, err)
	repo := func(ws, provider, host, path string) model.Repository {
		r, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: ws, Provider: provider, Host: host, Path: path})
		require.NoError(t, err)
		return r
	}
	gh := repo(w.ws.ID, "github", "github.com", "acme/api")
	w.gitlab = repo(w.ws.ID, "gitlab", "gitlab.com", "acme/web")
	w.local = repo(w.ws.ID, "local", "", "/src/tools")
	other, err := w.svc.CreateWorkspace(ctx, "globex")
	require.NoError(t, err)
	w.others = repo(other.ID, "github", "github.com", "globex/secret")
	w.task, err = w.svc.CreateTask(ctx, service.TaskInput{WorkspaceID: w.ws.ID, Title: "fix login", RepositoryID: gh.ID})
	require.NoError(t, err)
	sess, err := w.st.CreateSession(ctx, model.Session{TaskID: w.task.ID, Executor: "local", Mode: model.ModeTask,
		State: model.SessionRunning, AgentArgv: []string{"/bin/agent"}})
	require.NoError(t, err)
	w.session = sess.ID
	return w
}

func (w policyWorld) setPolicy(t *testing.T, p model.SourcePolicy) store.PolicyChange {
	t.Helper()
	out, err := w.svc.SetSourcePolicy(model.WithActor(context.Background(), alice), w.ws.ID, p)
	require.NoError(t, err)
	require.Equal(t, p, out.Workspace.AgentSources)
	return out
}

func (w policyWorld) generation(t *testing.T) uint64 {
	t.Helper()
	task, err := w.svc.GetTask(context.Background(), w.task.ID)
	require.NoError(t, err)
	return task.Providers.Generation
}

func (w policyWorld) events(t *testing.T, kind model.EventKind) []model.Event {
	t.Helper()
	evs, err := w.st.Events(context.Background(), w.task.ID, 0, 1000)
	require.NoError(t, err)
	var out []model.Event
	for _, e := range evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (w policyWorld) inbox(t *testing.T) []string {
	t.Helper()
	prompts, err := w.st.TakePrompts(context.Background(), w.task.ID)
	require.NoError(t, err)
	var out []string
	for _, p := range prompts {
		out = append(out, p.Text)
	}
	return out
}

func (w policyWorld) request(t *testing.T, repos ...model.Repository) model.SourceRequest {
	t.Helper()
	var ids []string
	for _, r := range repos {
		ids = append(ids, r.ID)
	}
	res, err := w.svc.AgentAddSources(context.Background(), w.session, w.task.ID, ids)
	require.NoError(t, err)
	require.NotNil(t, res.Request, "the approve policy holds the batch")
	return *res.Request
}

// TestEveryAdditionRecordsWhoMadeIt: under the default policy an agent's
// batch is attached at once and its sources.added event names the
// session; a person's batch names the person the API put in the context,
// and "unknown" when there is none.
func TestEveryAdditionRecordsWhoMadeIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPolicyWorld(t)
	require.Equal(t, model.SourcePolicyAllow, w.ws.AgentSources, "allow is the default: nothing changes for existing users")

	res, err := w.svc.AgentAddSources(ctx, w.session, w.task.ID, []string{w.gitlab.ID})
	require.NoError(t, err)
	assert.Nil(t, res.Request)
	assert.Equal(t, uint64(2), res.Sources.Task.Providers.Generation)

	_, err = w.svc.AddSources(model.WithActor(ctx, alice), w.task.ID, []string{w.local.ID})
	require.NoError(t, err)
	third, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/third"})
	require.NoError(t, err)
	_, err = w.svc.AddSources(ctx, w.task.ID, []string{third.ID})
	require.NoError(t, err)

	added := w.events(t, model.EventSourcesAdded)
	require.Len(t, added, 3)
	assert.Equal(t, model.Actor{Kind: model.ActorSession, Name: w.session}, added[0].Actor)
	assert.Equal(t, w.session, added[0].SessionID)
	assert.Contains(t, added[0].Message, "attached by session:"+w.session)
	assert.Equal(t, "person:alice", added[1].Actor.String())
	assert.Equal(t, service.UnknownPerson.String(), added[2].Actor.String())
	created := w.events(t, model.EventTaskCreated)
	assert.Empty(t, created[0].Actor.String(), "events nobody made have no actor")
	testutil.Figure(t, "source-policy/actors", "3 batches (agent, person, no credential): sources.added actors %s, %s, %s",
		added[0].Actor.Kind, added[1].Actor, added[2].Actor)
}

// TestDenyRefusesAndChangesNothing: under deny an agent's batch is
// refused with a sentinel that names the repositories and says to ask a
// person; the task, its events and the requests are untouched. A person
// still attaches through the API.
func TestDenyRefusesAndChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPolicyWorld(t)
	w.setPolicy(t, model.SourcePolicyDeny)
	before, err := w.st.Events(ctx, w.task.ID, 0, 1000)
	require.NoError(t, err)

	_, err = w.svc.AgentAddSources(ctx, w.session, w.task.ID, []string{w.gitlab.ID, w.local.ID})
	require.ErrorIs(t, err, store.ErrSourceAdditionDenied)
	require.ErrorIs(t, err, errdefs.ErrPermissionDenied)
	assert.Contains(t, err.Error(), w.gitlab.ID+" (gitlab.com/acme/web)")
	assert.Contains(t, err.Error(), w.local.ID+" (/src/tools)")
	assert.Contains(t, err.Error(), "ask a person")

	after, err := w.st.Events(ctx, w.task.ID, 0, 1000)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused batch records nothing")
	assert.Equal(t, uint64(1), w.generation(t))
	reqs, err := w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{TaskID: w.task.ID})
	require.NoError(t, err)
	assert.Empty(t, reqs)

	_, err = w.svc.AddSources(model.WithActor(ctx, alice), w.task.ID, []string{w.gitlab.ID})
	require.NoError(t, err, "the policy governs agents, not people")
}

// TestAnotherWorkspacesRepositoryIsRefusedUnderEveryPolicy: a batch that
// names a repository of another workspace (or none) is refused as an
// invalid field whatever the policy, before deny or approve apply, and
// nothing is recorded.
func TestAnotherWorkspacesRepositoryIsRefusedUnderEveryPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPolicyWorld(t)
	for _, p := range model.SourcePolicies {
		w.setPolicy(t, p)
		_, err := w.svc.AgentAddSources(ctx, w.session, w.task.ID, []string{w.gitlab.ID, w.others.ID})
		require.ErrorIs(t, err, errdefs.ErrInvalidArgument, "policy %s", p)
		assert.Equal(t, "repository_ids[1]", errdefs.FieldOf(err), "policy %s", p)
		_, err = w.svc.AgentAddSources(ctx, w.session, w.task.ID, []string{"repo_nope"})
		require.ErrorIs(t, err, errdefs.ErrNotFound, "policy %s", p)
	}
	reqs, err := w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{})
	require.NoError(t, err)
	assert.Empty(t, reqs)
	assert.Equal(t, uint64(1), w.generation(t))
}

// TestApprovePolicyHoldsTheBatchUntilAPersonDecides: the batch becomes a
// pending request (an event names the session), nothing is attached; the
// approval attaches it as one batch made by the approving person, records
// the decision, and leaves the agent a message in its inbox. Deciding it
// again is refused, naming who decided it.
func TestApprovePolicyHoldsTheBatchUntilAPersonDecides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPolicyWorld(t)
	w.setPolicy(t, model.SourcePolicyApprove)

	req := w.request(t, w.gitlab, w.local)
	assert.Equal(t, model.SourceRequestPending, req.State)
	assert.Equal(t, "session:"+w.session, req.RequestedBy.String())
	assert.Equal(t, uint64(1), w.generation(t), "nothing is attached while pending")
	requested := w.events(t, model.EventSourcesRequested)
	require.Len(t, requested, 1)
	assert.Equal(t, req.RequestedBy, requested[0].Actor)
	assert.Equal(t, []string{w.gitlab.ID, w.local.ID}, requested[0].RepositoryIDs)

	// The same batch asked again while pending is the same request; a
	// different batch is another.
	assert.Equal(t, req.ID, w.request(t, w.gitlab, w.local).ID)
	assert.Len(t, w.events(t, model.EventSourcesRequested), 1)
	pending, err := w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{TaskID: w.task.ID, State: model.SourceRequestPending})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, req.ID, pending[0].ID)
	assert.NotEqual(t, req.ID, w.request(t, w.local).ID)

	d, err := w.svc.ApproveSourceRequest(model.WithActor(ctx, alice), req.ID)
	require.NoError(t, err)
	assert.Equal(t, model.SourceRequestApproved, d.Request.State)
	assert.Equal(t, "person:alice", d.Request.DecidedBy.String())
	assert.Equal(t, []string{w.gitlab.ID, w.local.ID}, d.Request.AttachedIDs)
	require.NotNil(t, d.Sources)
	assert.Equal(t, uint64(2), d.Sources.Task.Providers.Generation, "one batch, one generation")
	assert.Equal(t, "github,gitlab", d.Sources.Task.Providers.Set.String())

	added := w.events(t, model.EventSourcesAdded)
	require.Len(t, added, 1)
	assert.Equal(t, "person:alice", added[0].Actor.String(), "the person who approved made the addition")
	assert.Contains(t, added[0].Message, req.ID)
	assert.Contains(t, added[0].Message, "session:"+w.session)
	decided := w.events(t, model.EventSourceRequestDecided)
	require.Len(t, decided, 1)
	assert.Equal(t, "person:alice", decided[0].Actor.String())
	assert.Len(t, w.events(t, model.EventProvidersRecomputed), 1)

	inbox := w.inbox(t)
	require.Len(t, inbox, 1)
	assert.Contains(t, inbox[0], req.ID)
	assert.Contains(t, inbox[0], "approved by person:alice")

	bob := model.WithActor(ctx, model.Actor{Kind: model.ActorPerson, Name: "bob"})
	_, err = w.svc.ApproveSourceRequest(bob, req.ID)
	require.ErrorIs(t, err, store.ErrAlreadyDecided)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), req.ID)
	assert.Contains(t, err.Error(), "approved by person:alice")
	_, err = w.svc.RejectSourceRequest(bob, req.ID, "too late")
	require.ErrorIs(t, err, store.ErrAlreadyDecided)
	assert.Equal(t, uint64(2), w.generation(t))
	assert.Empty(t, w.inbox(t), "a refused decision tells the agent nothing")

	_, err = w.svc.ApproveSourceRequest(ctx, "sreq_nope")
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	assert.Contains(t, err.Error(), `"sreq_nope"`)
	_, err = w.svc.RejectSourceRequest(ctx, "", "")
	assert.Equal(t, "request_id", errdefs.FieldOf(err))
}

// TestRejectionTellsTheAgentWhy: a rejection attaches nothing and the
// reason reaches the inbox; a reason that is too long or has control
// characters is refused naming the field.
func TestRejectionTellsTheAgentWhy(t *testing.T) {
	t.Parallel()
	ctx := model.WithActor(context.Background(), alice)
	w := newPolicyWorld(t)
	w.setPolicy(t, model.SourcePolicyApprove)
	req := w.request(t, w.gitlab)

	_, err := w.svc.RejectSourceRequest(ctx, req.ID, "no\x1bway")
	assert.Equal(t, "reason", errdefs.FieldOf(err))
	_, err = w.svc.RejectSourceRequest(ctx, req.ID, string(make([]rune, textlimit.Reason.Max+1)))
	assert.Equal(t, "reason", errdefs.FieldOf(err))

	d, err := w.svc.RejectSourceRequest(ctx, req.ID, "the web app is out of scope")
	require.NoError(t, err)
	assert.Equal(t, model.SourceRequestRejected, d.Request.State)
	assert.Nil(t, d.Sources)
	assert.Equal(t, uint64(1), w.generation(t))
	assert.Empty(t, w.events(t, model.EventSourcesAdded))
	inbox := w.inbox(t)
	require.Len(t, inbox, 1)
	assert.Contains(t, inbox[0], "rejected by person:alice: the web app is out of scope")
	assert.Contains(t, inbox[0], "ask a person")
	got, err := w.svc.GetSourceRequest(ctx, req.ID)
	require.NoError(t, err)
	assert.Equal(t, "the web app is out of scope", got.Reason)
}

// TestPolicyChangeWhilePending: switching to allow leaves pending
// requests for a person (nobody decided them); switching to deny rejects
// them at once, in the same transaction, with a reason, and tells the
// agent. A rejected request cannot be approved afterwards.
func TestPolicyChangeWhilePending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPolicyWorld(t)
	w.setPolicy(t, model.SourcePolicyApprove)
	first, second := w.request(t, w.gitlab), w.request(t, w.local)

	change := w.setPolicy(t, model.SourcePolicyAllow)
	assert.Empty(t, change.Rejected)
	pending, err := w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{WorkspaceID: w.ws.ID, State: model.SourceRequestPending})
	require.NoError(t, err)
	assert.Len(t, pending, 2, "allow leaves pending requests for a person")

	change = w.setPolicy(t, model.SourcePolicyDeny)
	require.Len(t, change.Rejected, 2)
	for _, d := range change.Rejected {
		assert.Equal(t, model.SourceRequestRejected, d.Request.State)
		assert.Equal(t, "person:alice", d.Request.DecidedBy.String())
		assert.Contains(t, d.Request.Reason, "changed to deny")
	}
	inbox := w.inbox(t)
	require.Len(t, inbox, 2)
	assert.Contains(t, inbox[0], first.ID)
	assert.Contains(t, inbox[1], second.ID)
	assert.Len(t, w.events(t, model.EventSourceRequestDecided), 2)

	_, err = w.svc.ApproveSourceRequest(ctx, first.ID)
	require.ErrorIs(t, err, store.ErrAlreadyDecided)
	assert.Equal(t, uint64(1), w.generation(t))
	rejected, err := w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{TaskID: w.task.ID, State: model.SourceRequestRejected})
	require.NoError(t, err)
	assert.Len(t, rejected, 2)

	testutil.Figure(t, "source-policy/policy-change", "switch to allow: %d of 2 pending requests left pending; switch to deny: %d of 2 rejected, %d inbox messages",
		len(pending), len(change.Rejected), len(inbox))

	_, err = w.svc.SetSourcePolicy(ctx, w.ws.ID, "sometimes")
	assert.Equal(t, "agent_sources", errdefs.FieldOf(err))
	_, err = w.svc.SetSourcePolicy(ctx, "ws_nope", model.SourcePolicyDeny)
	require.ErrorIs(t, err, errdefs.ErrNotFound)
	_, err = w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{State: "maybe"})
	assert.Equal(t, "state", errdefs.FieldOf(err))
	_, err = w.svc.ListSourceRequests(ctx, store.SourceRequestFilter{TaskID: "task_nope"})
	require.ErrorIs(t, err, errdefs.ErrNotFound)
}

// TestApprovalWhenTheWorldMoved: at approval time a repository may have
// been attached by a person meanwhile (it is skipped; if all were, the
// approval attaches nothing and moves no generation), the requesting
// session may have ended (the approval still applies and the inbox keeps
// the message for the task's next session), or a repository may be gone
// (the approval is refused, nothing changes, and the request can still
// be rejected).
func TestApprovalWhenTheWorldMoved(t *testing.T) {
	t.Parallel()
	ctx := model.WithActor(context.Background(), alice)
	w := newPolicyWorld(t)
	w.setPolicy(t, model.SourcePolicyApprove)

	// Already attached, partly.
	mixed := w.request(t, w.gitlab, w.local)
	_, err := w.svc.AddSources(ctx, w.task.ID, []string{w.gitlab.ID})
	require.NoError(t, err)
	d, err := w.svc.ApproveSourceRequest(ctx, mixed.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{w.local.ID}, d.Request.AttachedIDs)
	assert.Equal(t, uint64(3), w.generation(t))
	assert.Contains(t, w.inbox(t)[0], "1 of them were already attached")

	// Wholly attached: approved, nothing to attach.
	extra, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/extra"})
	require.NoError(t, err)
	whole := w.request(t, extra)
	_, err = w.svc.AddSources(ctx, w.task.ID, []string{extra.ID})
	require.NoError(t, err)
	d, err = w.svc.ApproveSourceRequest(ctx, whole.ID)
	require.NoError(t, err)
	assert.Equal(t, model.SourceRequestApproved, d.Request.State)
	assert.Empty(t, d.Request.AttachedIDs)
	assert.Nil(t, d.Sources)
	assert.Equal(t, uint64(4), w.generation(t), "nothing attached, no generation")
	assert.Contains(t, w.inbox(t)[0], "already attached")

	// The requesting session ended.
	late, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/late"})
	require.NoError(t, err)
	ended := w.request(t, late)
	_, err = w.st.UpdateSession(ctx, w.session, func(s *model.Session) ([]model.Event, error) {
		s.State = model.SessionStopped
		return nil, nil
	})
	require.NoError(t, err)
	d, err = w.svc.ApproveSourceRequest(ctx, ended.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{late.ID}, d.Request.AttachedIDs)
	assert.Empty(t, d.Sources.Pushes, "no live session to push to")
	assert.Len(t, w.inbox(t), 1, "the task's next session reads the outcome")

	// A repository gone (removed behind the orchestrator's back: there is
	// no API to delete one).
	gone, err := w.svc.CreateRepository(ctx, service.RepositoryInput{WorkspaceID: w.ws.ID, Provider: "local", Path: "/src/gone"})
	require.NoError(t, err)
	doomed := w.request(t, gone)
	db, err := sql.Open("sqlite", w.st.Path())
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM repositories WHERE id = ?`, gone.ID)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = w.svc.ApproveSourceRequest(ctx, doomed.ID)
	require.ErrorIs(t, err, errdefs.ErrFailedPrecondition)
	assert.Contains(t, err.Error(), gone.ID)
	assert.Contains(t, err.Error(), "reject it instead")
	got, err := w.svc.GetSourceRequest(ctx, doomed.ID)
	require.NoError(t, err)
	assert.Equal(t, model.SourceRequestPending, got.State, "a refused approval changes nothing")
	assert.Equal(t, uint64(5), w.generation(t))
	_, err = w.svc.RejectSourceRequest(ctx, doomed.ID, "the repository is gone")
	require.NoError(t, err)
	testutil.Figure(t, "source-policy/world-moved", "half-attached batch: 1 of 2 attached; wholly attached: approved, 0 attached, no generation; "+
		"ended session: attached, inbox kept; vanished repository: approval refused, request %s", got.State)
}

// TestConcurrentDecisionsApplyOnce: many people approving and rejecting
// the same request at once: exactly one decision applies, the others are
// told it was already decided, and at most one batch is attached.
func TestConcurrentDecisionsApplyOnce(t *testing.T) {
	t.Parallel()
	ctx := model.WithActor(context.Background(), alice)
	w := newPolicyWorld(t)
	w.setPolicy(t, model.SourcePolicyApprove)
	req := w.request(t, w.gitlab)

	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if i%2 == 0 {
				_, errs[i] = w.svc.ApproveSourceRequest(ctx, req.ID)
			} else {
				_, errs[i] = w.svc.RejectSourceRequest(ctx, req.ID, "no")
			}
		})
	}
	wg.Wait()
	applied, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			applied++
		case errors.Is(err, store.ErrAlreadyDecided):
			refused++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 1, applied)
	assert.Equal(t, n-1, refused)
	assert.Len(t, w.events(t, model.EventSourceRequestDecided), 1)
	assert.LessOrEqual(t, len(w.events(t, model.EventSourcesAdded)), 1)
	assert.Len(t, w.inbox(t), 1)
	testutil.Figure(t, "source-policy/concurrent-decisions", "%d concurrent approve/reject calls on one request: %d applied, %d refused as already decided",
		n, applied, refused)
}
