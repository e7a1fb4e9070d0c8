package toolcalls

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors"
	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/scrub"
)

// random is n random letters and digits.
func random(t *testing.T, n int) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// TestProviderEchoesNeverReachTheAgent: providers whose error bodies echo
// the credential header (GitHub's Authorization with a ghp_ token; a
// self-managed GitLab's PRIVATE-TOKEN with a legacy token that has no
// prefix), and review comments holding a token someone pasted, a
// credential of the workspace among them: every provider tool is called
// through its error paths (422, 403, 404, 409, 400, 418) and its success
// path, and no result that leaves through CallHandler holds any of the
// secrets — whole, base64 or a 12-byte piece. Positive controls: the
// providers' error bodies hold the credentials, and the results before
// CallHandler's scrubbing hold the tokens pasted in comments (forge already
// scrubs error answers as they arrive; CallHandler is the boundary behind).
func TestProviderEchoesNeverReachTheAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	legacy := random(t, 40) // a GitLab token from before prefixes: only its value can find it
	planted := "ghp_" + random(t, 36)
	gl := forgetest.NewGitLab(t, legacy, "gl-bot")
	gl.AddProject("acme/web", "main", "fix-login")
	gl.AddUser("erin")
	f.env["GL_LEGACY"] = legacy
	_, err := f.st.SetConnection(ctx, f.ws.ID, model.Connection{Provider: providers.GitLab, APIBaseURL: gl.URL,
		Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GL_LEGACY"}, Username: "gl-bot"})
	require.NoError(t, err)
	f.d.conns = f.connections(&scrub.Set{})
	f.gh.EchoCredentials(true)
	gl.EchoCredentials(true)

	var raw, scrubbed [][]byte
	call := func(tool string, args map[string]any) executors.ToolResult {
		t.Helper()
		b, err := json.Marshal(args)
		require.NoError(t, err)
		res := f.d.Handle(ctx, Call{SessionID: f.session.ID, TaskID: f.task.ID, Tool: tool, Arguments: b, OnLink: true})
		out := f.d.result(res)
		structured, err := json.Marshal(res.Structured)
		require.NoError(t, err)
		raw = append(raw, append([]byte(res.Text), structured...))
		scrubbed = append(scrubbed, append([]byte(out.Code+out.Text), out.Structured...))
		if len(out.Structured) > 0 {
			assert.True(t, json.Valid(out.Structured), "%s: %s", tool, out.Structured)
		}
		return out
	}
	failing := func(code, tool string, args map[string]any) {
		t.Helper()
		out := call(tool, args)
		require.True(t, out.IsError, "%s succeeded: %s", tool, out.Text)
		assert.Equal(t, code, out.Code, "%s: %s", tool, out.Text)
	}

	// CallHandler is the exit, and it scrubs.
	direct := f.d.CallHandler(ctx, executors.ToolCall{SessionID: f.session.ID, TaskID: f.task.ID, Tool: toolapi.GitHubPRCreate,
		Arguments: json.RawMessage(`{"branch":"no-such-branch","title":"x"}`), OnLink: true})
	assert.Equal(t, "provider_invalid", direct.Code)
	assert.Contains(t, direct.Text, "Authorization: Bearer [redacted]", "the message keeps its sense: %s", direct.Text)

	// Create: the branch does not exist (422), then it does.
	failing("provider_invalid", toolapi.GitHubPRCreate, map[string]any{"branch": "no-such-branch", "title": "x"})
	failing("provider_invalid", toolapi.GitLabMRCreate, map[string]any{"branch": "no-such-branch", "title": "x"})
	for _, tool := range []string{toolapi.GitHubPRCreate, toolapi.GitLabMRCreate} {
		assert.False(t, call(tool, map[string]any{"branch": "fix-login", "title": "Fix login"}).IsError, tool)
	}

	// A token pasted in review comments: someone's GitHub token, and the
	// workspace's own GitLab credential.
	ghThread := strconv.FormatInt(f.gh.AddComment("acme/api", 1, "alice", "try "+planted+" or "+legacy+" or "+githubToken, "login.go", 3), 10)
	glThread := gl.AddDiscussion("acme/web", 1, "frank", "the token is "+legacy+" and "+planted, "login.go", 4)
	for _, tool := range []string{toolapi.GitHubPRComments, toolapi.GitLabMRDiscussions} {
		out := call(tool, nil)
		require.False(t, out.IsError, "%s: %s", tool, out.Text)
		assert.Contains(t, string(out.Structured), scrub.Redacted, tool)
	}

	// Every tool that reaches the provider, through each kind of failure
	// whose message the provider writes.
	statuses := []struct {
		status int
		code   string
	}{{403, "provider_forbidden"}, {404, "provider_not_found"}, {422, "provider_invalid"}, {409, "provider_invalid"},
		{400, "provider_invalid"}, {http.StatusTeapot, "provider_error"}}
	type failer interface {
		FailNext(method, contains string, status, retryAfter int)
	}
	i := 0
	for _, p := range []struct {
		group     toolapi.Group
		fake      failer
		thread    string
		reviewers string // the method of the first request of requesting reviewers
	}{{toolapi.GroupGitHub, f.gh, ghThread, http.MethodPost}, {toolapi.GroupGitLab, gl, glThread, http.MethodGet}} {
		for _, c := range []struct {
			tool, method string
			args         map[string]any
		}{
			{p.group.Like(toolapi.GitHubPRStatus), http.MethodGet, nil},
			{p.group.Like(toolapi.GitHubPRComments), http.MethodGet, nil},
			{p.group.Like(toolapi.GitHubPRReply), http.MethodPost, map[string]any{"thread_id": p.thread, "body": "done"}},
			{p.group.Like(toolapi.GitHubPRRequestReviewers), p.reviewers, map[string]any{"reviewers": []string{"erin"}}},
		} {
			for range 2 {
				s := statuses[i%len(statuses)]
				i++
				p.fake.FailNext(c.method, "", s.status, 0)
				failing(s.code, c.tool, c.args)
			}
		}
		assert.False(t, call(p.group.Like(toolapi.GitHubPRAutomation), nil).IsError)
		assert.False(t, call(p.group.Like(toolapi.GitHubPRSetAutomation), map[string]any{"auto_merge": true}).IsError)
	}

	secrets := map[string]string{"github token": githubToken, "gitlab legacy token": legacy, "planted token": planted}
	scanner := testutil.NewLeakScanner(secrets)
	// Control: the providers did echo their credentials.
	echoes := scanner.Find([]byte(strings.Join(append(f.gh.Echoed(), gl.Echoed()...), "\n")))
	assert.Contains(t, echoes, "github token")
	assert.Contains(t, echoes, "gitlab legacy token")
	rawHits := map[string]bool{}
	for _, b := range raw {
		for _, h := range scanner.Find(b) {
			rawHits[h] = true
		}
	}
	found := 0
	for name := range secrets {
		assert.True(t, rawHits[name], "control: unscrubbed results hold the %s", name)
		if rawHits[name] {
			found++
		}
	}
	var bytes, occurrences int
	for i, b := range scrubbed {
		bytes += len(b)
		hits := scanner.Find(b)
		occurrences += len(hits)
		assert.Empty(t, hits, "result %d: %s", i, b)
	}
	testutil.Figure(t, "provider echoes", "%d results of provider tools (errors 403/404/409/400/418/422 echoing the credential header, "+
		"comments holding tokens; a ghp_ token and a 40-char legacy token) scanned, %d bytes, %d needles: %d occurrences; "+
		"controls: the echoing error bodies hold both credentials, the results before CallHandler hold %d of the %d secrets", len(scrubbed), bytes, scanner.Needles(), occurrences, found, len(secrets))
}
