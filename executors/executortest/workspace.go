package executortest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/gittest"
)

// Workspaces says how a backend's sessions reach the suite's git server;
// set, the lifecycle suite runs the workspace case on the backend.
type Workspaces struct {
	// Host is an address of this machine that the backend's agentctl
	// reaches: 127.0.0.1 for an agentctl on this host, the bridge's
	// gateway for one in a container.
	Host string
	// Prepare adapts a spec to a session that runs git: an image with git
	// (GitImage), for example. May be nil.
	Prepare func(spec *executors.Spec)
}

// gitToken is the suite's git server's token: the fetch and delivery
// credential, which no agent may see.
const gitToken = "ghs_conformanceGitToken0123456789abcdefXYZ"

// serve starts a git server on w.Host holding acme/api (README.md on
// main), behind gitToken.
func (w *Workspaces) serve(t *testing.T) (*gittest.Host, string) {
	t.Helper()
	host := gittest.New(gitToken, nil)
	t.Cleanup(host.Close)
	_, err := host.Seed("acme/api", map[string]string{"README.md": "hello\n"}, "main")
	require.NoError(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(w.Host, "0"))
	require.NoError(t, err)
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: host, ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	t.Cleanup(srv.Close)
	return host, srv.URL
}

// workspace is the workspace case: a session starts in a workspace
// holding its task's repository on its own branch; its agent (its own
// uid) changes and commits there, never finds the credential and cannot
// push itself (the default branch, another, its own forced); the work
// is measured, delivered (only the session's branch) and kept by a stop;
// the session launched again finds its workspace, and a second session of
// the repository fetches nothing again; a removed workspace is made anew
// from the delivered branch. On a backend whose stop ends the workspace
// (executors.WorkspaceDropper), the session launched again starts from
// its delivered branch.
func (w *Workspaces) workspace(t *testing.T, e executors.Executor, s executors.Spec,
	launch func(*testing.T, executors.Executor, executors.Spec) (executors.Handle, executors.Status), ctx func(*testing.T) context.Context) {
	host, url := w.serve(t)
	if w.Prepare != nil {
		w.Prepare(&s)
	}
	const key = "github.com/acme/api"
	cred := executors.GitCredential{User: "x-access-token", Token: gitToken}
	branch := executors.SessionBranch(s.TaskID, s.SessionID)
	s.Checkouts = []executors.Checkout{{Key: key, URL: url + "/acme/api.git", Branch: branch, Path: "api", Fetch: cred}}
	main, ok := host.Head("acme/api", "main")
	require.True(t, ok)

	// agentRuns launches spec with an agent running script in its working
	// directory, waits for it to exit 0 and returns its handle, status
	// and output.
	agentRuns := func(t *testing.T, spec executors.Spec, script string) (executors.Handle, executors.Status) {
		t.Helper()
		spec.Agent = &executors.AgentCommand{Argv: []string{"sh", "-c", "set -e; " + script}}
		h, st := launch(t, e, spec)
		require.Eventually(t, func() bool {
			var err error
			st, err = control(e).Inspect(ctx(t), h)
			return err == nil && st.Phase == executors.PhaseAgentExited
		}, time.Minute, 20*time.Millisecond, "the agent exits")
		require.Equal(t, 0, st.AgentExitCode, "the agent: %s", st.AgentOutput)
		return h, st
	}
	work := func(t *testing.T, h executors.Handle) executors.Work {
		t.Helper()
		st, err := control(e).Work(ctx(t), h)
		require.NoError(t, err)
		require.Len(t, st.Checkouts, 1)
		require.NotNil(t, st.Checkouts[0].Work, "measured")
		require.Empty(t, st.Checkouts[0].Work.Error)
		return *st.Checkouts[0].Work
	}

	// The token is looked for in pieces: the agent's command line must
	// not hold it whole.
	h, st := agentRuns(t, s, fmt.Sprintf(`cd api
test "$(git branch --show-current)" = %q
test "$(cat README.md)" = hello
t=%s; t="$t"%s
if grep -rqsF "$t" /proc/self/environ /proc/1/environ /proc/1/cmdline . ; then echo the credential is within reach; exit 3; fi
echo change >> README.md
git -c user.name=agent -c user.email=agent@localhost commit -qam "the agent's change"
export GIT_TERMINAL_PROMPT=0
for ref in HEAD:refs/heads/main HEAD:refs/heads/other +HEAD:refs/heads/%s; do
  if git push -q origin "$ref" 2>/dev/null; then echo pushed "$ref" without a credential; exit 4; fi
done
echo new > agent-was-here
echo in "$(pwd)"`, branch, gitToken[:10], gitToken[10:], branch))
	require.NotEmpty(t, st.WorkspaceDir)
	require.Len(t, st.Checkouts, 1)
	made := st.Checkouts[0]
	made.Work = nil // measured below
	assert.Equal(t, executors.CheckoutState{Key: key, Path: "api", Branch: branch}, made)
	assert.Contains(t, st.AgentOutput, "in "+strings.TrimSuffix(st.WorkspaceDir, "/")+"/api", "the workspace is the agent's working directory")
	measured := work(t, h)
	assert.Equal(t, executors.Work{Head: measured.Head, Uncommitted: 1, Unpushed: 1}, measured, "one untracked file, one commit")

	d, err := control(e).Deliver(ctx(t), h, key, cred)
	require.NoError(t, err)
	assert.Equal(t, "refs/heads/"+branch, d.Ref)
	pushed, ok := host.Head("acme/api", branch)
	require.True(t, ok, "the session's branch reached the server")
	assert.Equal(t, d.Commit, pushed)
	now, _ := host.Head("acme/api", "main")
	assert.Equal(t, main, now, "the default branch is untouched")
	_, other := host.Head("acme/api", "other")
	assert.False(t, other, "the agent's own pushes reached nothing")
	assert.Equal(t, executors.Work{Head: d.Commit, Uncommitted: 1}, work(t, h), "delivered: only the untracked file is left")

	stopped, err := control(e).StopSession(ctx(t), h)
	require.NoError(t, err)
	require.Len(t, stopped.Checkouts, 1)
	require.NotNil(t, stopped.Checkouts[0].Work, "a stop measures the work")
	assert.Equal(t, 1, stopped.Checkouts[0].Work.Uncommitted)
	require.NoError(t, e.Stop(ctx(t), h))

	if dr, ok := e.(executors.WorkspaceDropper); ok && dr.DropsWorkspaces() {
		// The workspace ended with the stop (the service allows that only
		// once the work is delivered, or discarded): launched again, the
		// session's checkout is made anew, from the branch it delivered.
		_, st2 := agentRuns(t, s, `test ! -e api/agent-was-here; git -C api log -1 --format=head=%H`)
		assert.Contains(t, st2.AgentOutput, "head="+d.Commit, "the delivered branch is continued")
		return
	}

	// Launched again (a resume), the session finds its workspace with the
	// work in it; the mirror fetched nothing new.
	h2, st2 := agentRuns(t, s, `cat api/agent-was-here`)
	require.Len(t, st2.Checkouts, 1)
	assert.Empty(t, st2.Checkouts[0].Error)
	assert.Contains(t, st2.AgentOutput, "new", "the kept checkout, with its uncommitted file")
	assert.Equal(t, 1, host.Fetches("acme/api"), "one download of the repository for both runs")

	rm, ok := e.(executors.WorkspaceRemover)
	if !ok {
		return
	}
	err = rm.RemoveWorkspace(ctx(t), h2, st2.WorkspaceDir)
	assert.ErrorIs(t, err, errdefs.ErrFailedPrecondition, "a running session's workspace stays: %v", err)
	require.NoError(t, e.Stop(ctx(t), h2))
	require.NoError(t, rm.RemoveWorkspace(ctx(t), h2, st2.WorkspaceDir))
	// Made anew, from the branch the session delivered.
	_, st3 := agentRuns(t, s, `test ! -e api/agent-was-here; git -C api log -1 --format=head=%H`)
	assert.Contains(t, st3.AgentOutput, "head="+d.Commit, "the delivered branch is continued")
}
