package toolcalls

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/internal/providers"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/connections"
	"github.com/toolscope/toolscope/orchestrator/internal/credentials"
	"github.com/toolscope/toolscope/orchestrator/internal/events"
	"github.com/toolscope/toolscope/orchestrator/internal/forge"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/standin"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
	"github.com/toolscope/toolscope/orchestrator/internal/service"
	"github.com/toolscope/toolscope/orchestrator/internal/store"
)

// fuzzToolNames is every tool the dispatcher answers, from its own
// tables, sorted: the order FuzzToolArguments picks a tool by.
func fuzzToolNames() []string {
	return slices.Sorted(maps.Keys(builtins))
}

// TestFuzzToolNamesAreTheSurface: the tools FuzzToolArguments drives are
// exactly the ones agentctl can show an agent (toolapi.WorkspaceSurface
// with both providers: 5 task tools, 7 GitHub and 7 GitLab tools), so a
// new tool cannot escape the fuzzer.
func TestFuzzToolNamesAreTheSurface(t *testing.T) {
	t.Parallel()
	names := fuzzToolNames()
	assert.Len(t, names, 19)
	assert.Equal(t, toolapi.WorkspaceSurface("github", "gitlab"), names)
}

// fuzzCodes is the stable set of refusal codes: the dispatcher's and
// package forge's.
var fuzzCodes = map[string]bool{
	toolapi.CodeUnknownSession: true, toolapi.CodePermissionDenied: true, toolapi.CodeSessionEnded: true, toolapi.CodeUnknownTool: true,
	toolapi.CodeInvalidArguments: true, toolapi.CodeProviderNotAttached: true, toolapi.CodeNotConnected: true, toolapi.CodeCredentialUnavailable: true,
	toolapi.CodeRepositoryNotAttached: true, toolapi.CodeProviderMismatch: true, toolapi.CodeAmbiguousRepository: true, toolapi.CodeNoChangeRequest: true,
	toolapi.CodeAlreadyExists: true, toolapi.CodeInternal: true, toolapi.CodeResultTooLarge: true,
	toolapi.CodeNoWorkspace: true, toolapi.CodePushRejected: true, toolapi.CodePushFailed: true,
	forge.CodeUnauthorized: true, forge.CodeForbidden: true, forge.CodeNotFound: true, forge.CodeInvalid: true,
	forge.CodeRateLimited: true, forge.CodeUnavailable: true, forge.CodeFailed: true,
}

// beforeTheProvider are the refusals decided before any provider call:
// a call refused with one of them must not have reached GitHub or GitLab.
var beforeTheProvider = map[string]bool{
	toolapi.CodeUnknownSession: true, toolapi.CodePermissionDenied: true, toolapi.CodeSessionEnded: true, toolapi.CodeUnknownTool: true,
	toolapi.CodeInvalidArguments: true, toolapi.CodeProviderNotAttached: true, toolapi.CodeNotConnected: true, toolapi.CodeCredentialUnavailable: true,
	toolapi.CodeRepositoryNotAttached: true, toolapi.CodeProviderMismatch: true, toolapi.CodeAmbiguousRepository: true, toolapi.CodeNoChangeRequest: true,
	toolapi.CodeAlreadyExists: true, toolapi.CodeNoWorkspace: true,
}

const (
	fuzzGitHubToken = "ghp_FUZZTHEGITHUBSECRET0123456789abc"
	fuzzGitLabToken = "glpat-FUZZTHEGITLABSECRET0123"
)

// fuzzFixture is the toolcalls fixture for fuzzing: a dispatcher over a
// real store, wired to the orchestrator's own AddSources, a workspace
// connected to stand-in GitHub and GitLab servers, a task on a GitHub
// repository with a GitLab one attached (and a pull request already open
// on GitHub), and a running session on it. Arguments name the fixture's
// records through placeholders (see ids).
type fuzzFixture struct {
	dir   string
	st    *store.Store
	svc   *service.Service
	d     *Dispatcher
	logs  *testutil.SyncBuffer
	seen  int // how much of logs was checked already
	gh    *standin.GitHub
	gl    *standin.GitLab
	task  model.Task
	sess  model.Session
	ids   map[string]string
	calls int
}

// fuzzRebuildEvery bounds the fixture's state (the stand-ins' request
// logs and comments, the store's events): it is rebuilt, fresh, after
// this many calls.
const fuzzRebuildEvery = 300

func newFuzzFixture(tb testing.TB, root string) *fuzzFixture {
	tb.Helper()
	ctx := context.Background()
	x := &fuzzFixture{logs: &testutil.SyncBuffer{}, ids: map[string]string{}}
	var err error
	x.dir, err = os.MkdirTemp(root, "fixture")
	require.NoError(tb, err)
	broker := &events.Broker{}
	x.st, err = store.Open(ctx, x.dir, store.Options{OnCommit: broker.Publish})
	require.NoError(tb, err)
	x.svc = service.New(x.st, broker, service.Options{})
	x.d = New(x.st, slog.New(slog.NewTextHandler(x.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	env := map[string]string{"GH_TOKEN": fuzzGitHubToken, "GL_TOKEN": fuzzGitLabToken}
	x.d.conns = connections.New(x.st, connections.Options{Credentials: credentials.Resolver{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}})
	x.d.SetSourceAdder(func(ctx context.Context, sessionID, taskID string, repoIDs []string) (SourceOutcome, error) {
		res, err := x.svc.AgentAddSources(ctx, sessionID, taskID, repoIDs)
		return SourceOutcome{Providers: res.Sources.Task.Providers, Request: res.Request}, err
	})

	x.gh = standin.NewGitHub(fuzzGitHubToken, "octo-bot")
	x.gh.AddRepo("acme/api", "main", "fix-login")
	x.gh.AddRepo("acme/docs", "main", "fix-login")
	x.gl = standin.NewGitLab(fuzzGitLabToken, "gl-bot")
	x.gl.AddProject("acme/web", "main", "fix-login")
	x.gl.AddUser("erin")

	ws, err := x.st.CreateWorkspace(ctx, "acme")
	require.NoError(tb, err)
	for _, c := range []model.Connection{
		{Provider: providers.GitHub, APIBaseURL: x.gh.URL, Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GH_TOKEN"}, Username: "octo-bot"},
		{Provider: providers.GitLab, APIBaseURL: x.gl.URL, Credential: model.CredentialRef{Kind: model.CredentialEnv, Ref: "GL_TOKEN"}, Username: "gl-bot"},
	} {
		_, err = x.st.SetConnection(ctx, ws.ID, c)
		require.NoError(tb, err)
	}
	for name, r := range map[string]model.Repository{
		"@repo.github": {Provider: "github", Host: "github.com", Path: "acme/api"},
		"@repo.gitlab": {Provider: "gitlab", Host: "gitlab.com", Path: "acme/web"},
		"@repo.docs":   {Provider: " GitHub ", Host: "github.com", Path: "acme/docs"},
		"@repo.odd":    {Provider: "G\u0130THUB", Path: "/src/look-alike"},
		"@repo.local":  {Provider: "local", Path: "/src/tools"},
	} {
		r.WorkspaceID = ws.ID
		r, err = x.st.CreateRepository(ctx, r)
		require.NoError(tb, err)
		x.ids[name] = r.ID
	}
	x.task, err = x.st.CreateTask(ctx, model.Task{WorkspaceID: ws.ID, Title: "fix login"}, x.ids["@repo.github"])
	require.NoError(tb, err)
	x.task, err = x.st.AddSources(ctx, x.task.ID, []string{x.ids["@repo.gitlab"]}, testActor)
	require.NoError(tb, err)
	x.sess, err = x.st.CreateSession(ctx, model.Session{TaskID: x.task.ID, Executor: "local", Mode: model.ModeTask,
		State: model.SessionRunning, AgentArgv: []string{"/usr/bin/claude"}})
	require.NoError(tb, err)
	x.ids["@task"], x.ids["@session"], x.ids["@ws"] = x.task.ID, x.sess.ID, ws.ID

	created := x.d.Handle(ctx, Call{SessionID: x.sess.ID, TaskID: x.task.ID, Tool: toolapi.GitHubPRCreate, OnLink: true,
		Arguments: json.RawMessage(`{"branch":"fix-login","title":"Fix login"}`)})
	require.False(tb, created.IsError, "%s: %s", created.Code, created.Text)
	x.ids["@thread.github"] = strconv.FormatInt(x.gh.AddComment("acme/api", 1, "alice", "nit", "login.go", 3), 10)
	return x
}

func (x *fuzzFixture) close() {
	x.gh.Close()
	x.gl.Close()
	x.svc.Close()
	_ = x.st.Close()
	_ = os.RemoveAll(x.dir)
}

// expand replaces each placeholder, as a JSON string, with the id it
// stands for.
func (x *fuzzFixture) expand(args []byte) []byte {
	for name, id := range x.ids {
		args = bytes.ReplaceAll(args, []byte(strconv.Quote(name)), []byte(strconv.Quote(id)))
	}
	return args
}

func (x *fuzzFixture) providerRequests() int { return len(x.gh.Requests()) + len(x.gl.Requests()) }

// checkProviders fails t if a structured result names a provider outside
// the allowlist or a provider set that is not canonical.
func checkProviders(t *testing.T, structured any) {
	t.Helper()
	set := func(what string, got []string) {
		if !slices.Equal(got, providers.Of(got...).Strings()) {
			t.Fatalf("%s: providers %q are not a canonical set of allowlisted providers", what, got)
		}
	}
	one := func(what, p string) {
		if p != string(providers.GitHub) && p != string(providers.GitLab) {
			t.Fatalf("%s: provider %q is outside the allowlist", what, p)
		}
	}
	switch s := structured.(type) {
	case toolapi.TaskInfo:
		set("task_info", s.Providers)
	case toolapi.SessionInfo:
		set("session_info", s.Providers)
		for _, a := range s.Accounts {
			one("session_info account", a.Provider)
		}
	case toolapi.AddSourcesResult:
		set("task_add_sources", s.Providers)
	case toolapi.ChangeRequest:
		one("change request", s.Provider)
	case toolapi.ChangeStatus:
		one("change status", s.Provider)
	case toolapi.AutomationResult:
		one("automation", s.ChangeRequest.Provider)
	}
}

// toolSeeds are arguments for every tool: valid calls, each argument of
// the wrong JSON type, unknown arguments, not-objects, look-alikes, huge
// and deeply nested values. "@…" strings name the fixture's records.
func toolSeeds(tb testing.TB) []testutil.FuzzSeed {
	tb.Helper()
	names := fuzzToolNames()
	deep := strings.Repeat(`{"a":[`, 200) + `1` + strings.Repeat(`]}`, 200)
	huge := strings.Repeat("x", 4096) + "\u00e9"
	many := make([]string, service.MaxBatch+1)
	for i := range many {
		many[i] = fmt.Sprintf("%q", "repo_"+strconv.Itoa(i))
	}
	common := []string{``, `null`, `{}`, `[]`, `"x"`, `42`, `{"x":1}`, `{`, `{"repository_id":5}`,
		`{"repository_id":"@repo.odd"}`, `{"repository_id":"G\u0130THUB"}`, `{"repository_id":"` + huge + `"}`, `{"body":` + deep + `}`}
	byTool := map[string][]string{
		"task_info":    {},
		"session_info": {`{}`},
		"task_inbox":   {`{}`},
		"task_add_sources": {`{"repository_ids":["@repo.docs"]}`, `{"repository_ids":["@repo.odd","@repo.local"]}`,
			`{"repository_ids":"@repo.docs"}`, `{"repository_ids":[1]}`, `{"repository_ids":[]}`, `{"repository_ids":null}`,
			`{"repository_ids":["@repo.docs","@repo.docs"]}`, `{"repository_ids":["@repo.gitlab"]}`, `{"repository_ids":[" "]}`,
			`{"repository_ids":[` + strings.Join(many, ",") + `]}`, `{"repository_ids":["@repo.docs"],"task_id":"task_other"}`},
	}
	for _, group := range []struct {
		group                    toolapi.Group
		repo, other, reviewer    string
		create, thread, provider string
	}{
		{toolapi.GroupGitHub, "@repo.github", "@repo.gitlab", "carol", "fix-login", "@thread.github", "github"},
		{toolapi.GroupGitLab, "@repo.gitlab", "@repo.github", "erin", "fix-login", "1", "gitlab"},
	} {
		byTool[group.group.Like(toolapi.GitHubPRCreate)] = []string{
			`{"branch":"fix-login","title":"Fix login","draft":true}`,
			`{"repository_id":"` + group.repo + `","branch":"fix-login","title":"Fix","base":"main","body":"**b**"}`,
			`{"repository_id":"` + group.other + `","branch":"fix-login","title":"x"}`,
			`{"branch":"fix-login"}`, `{"title":"x"}`, `{"branch":1,"title":"x"}`, `{"branch":"fix-login","title":["x"]}`,
			`{"branch":"fix-login","title":"x","draft":"yes"}`, `{"branch":"no-such-branch","title":"x"}`,
			`{"branch":"fix-login","title":"` + huge + `"}`, `{"branch":"fix-login","title":"x","task_id":"task_other"}`,
			`{"branch":"fix-login","title":"x","body":` + deep + `}`,
		}
		byTool[group.group.Like(toolapi.GitHubPRStatus)] = []string{`{"repository_id":"` + group.repo + `"}`, `{"repository_id":"` + group.other + `"}`}
		byTool[group.group.Like(toolapi.GitHubPRComments)] = []string{`{"repository_id":"` + group.repo + `"}`}
		byTool[group.group.Like(toolapi.GitHubPRReply)] = []string{`{"thread_id":"` + group.thread + `","body":"fixed"}`, `{"thread_id":1,"body":"x"}`,
			`{"thread_id":"` + group.thread + `"}`, `{"thread_id":"999999","body":"x"}`, `{"thread_id":"` + group.thread + `","body":{"a":1}}`}
		byTool[group.group.Like(toolapi.GitHubPRRequestReviewers)] = []string{`{"reviewers":["` + group.reviewer + `"]}`, `{"reviewers":"` + group.reviewer + `"}`,
			`{"reviewers":[]}`, `{"reviewers":[null]}`, `{"reviewers":["nobody-at-all"]}`, `{"reviewers":["G\u0130THUB"]}`}
		byTool[group.group.Like(toolapi.GitHubPRAutomation)] = []string{`{"repository_id":"` + group.repo + `"}`}
		byTool[group.group.Like(toolapi.GitHubPRSetAutomation)] = []string{`{"auto_merge":true,"prompt_on_closed":false}`, `{"auto_merge":"yes"}`, `{"auto_merge":null}`,
			`{"prompt_on_merged":1}`, `{"auto_fix_checks":true,"repository_id":"` + group.repo + `"}`}
	}
	// The arguments every tool must survive go to a task tool, a tool
	// that decodes its arguments and one that only selects a repository.
	for _, name := range []string{"task_info", "task_add_sources", toolapi.GitHubPRCreate, toolapi.GitLabMRStatus} {
		byTool[name] = append(byTool[name], common...)
	}
	var out []testutil.FuzzSeed
	for i, name := range names {
		args := byTool[name]
		for j, a := range args {
			out = append(out, testutil.FuzzSeed{Name: fmt.Sprintf("%s-%02d", name, j), Args: []any{uint8(i), []byte(a)}})
		}
	}
	return out
}

// FuzzToolArguments calls every tool the dispatcher answers with
// arbitrary arguments, as the fixture's running session: tool picks the
// tool, args are the raw arguments. No call may panic; a refused call has
// a code from the stable set that the tool table gives the tool, and one refused before the provider made no
// request to it; no result or log line carries a token; every provider a
// result names is allowlisted.
func FuzzToolArguments(f *testing.F) {
	testutil.AddFuzzSeeds(f, toolSeeds(f))
	names := fuzzToolNames()
	root := f.TempDir()
	var x *fuzzFixture
	f.Cleanup(func() {
		if x != nil {
			x.close()
		}
	})
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		if x == nil || x.calls >= fuzzRebuildEvery {
			if x != nil {
				x.close()
			}
			x = newFuzzFixture(t, root)
		}
		x.calls++
		name := names[int(tool)%len(names)]
		before := x.providerRequests()
		res := x.d.Handle(context.Background(), Call{SessionID: x.sess.ID, TaskID: x.task.ID, Tool: name, Arguments: x.expand(args), OnLink: true})

		if testing.Verbose() {
			t.Logf("%s(%.120q): error %v, code %q: %.200s", name, args, res.IsError, res.Code, res.Text)
		}
		if res.IsError {
			if !fuzzCodes[res.Code] {
				t.Fatalf("%s refused with code %q, not a stable code: %s", name, res.Code, res.Text)
			}
			if !slices.Contains(builtins[name].Refusals(), res.Code) {
				t.Fatalf("%s refused with code %q, which toolapi's table does not give it: %s", name, res.Code, res.Text)
			}
			if res.Code == toolapi.CodeInternal {
				t.Fatalf("%s failed inside the orchestrator: %s\n%s", name, res.Text, x.logs.String()[x.seen:])
			}
			if beforeTheProvider[res.Code] && x.providerRequests() != before {
				t.Fatalf("%s refused with %s, but it reached the provider", name, res.Code)
			}
		} else if res.Code != "" {
			t.Fatalf("%s succeeded with code %q", name, res.Code)
		}
		structured, err := json.Marshal(res.Structured)
		if err != nil {
			t.Fatalf("%s: the structured result cannot be encoded: %v", name, err)
		}
		checkProviders(t, res.Structured)
		logs := x.logs.String()
		everything := res.Code + res.Text + string(structured) + logs[x.seen:]
		x.seen = len(logs)
		for _, secret := range []string{fuzzGitHubToken, fuzzGitLabToken, "FUZZTHE"} {
			if strings.Contains(everything, secret) {
				t.Fatalf("%s: a token leaked into a result or a log line", name)
			}
		}
	})
}
