package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolscope/toolscope/executors/executortest"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// asOwner runs git in dir as the user who owns dir (the session's agent:
// its uid when the orchestrator runs as root), with an identity of its
// own and no user or system configuration.
func asOwner(t *testing.T, dir string, args ...string) string {
	t.Helper()
	info, err := os.Stat(dir)
	require.NoError(t, err)
	st := info.Sys().(*syscall.Stat_t)
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@localhost", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@localhost"}
	if int(st.Uid) != os.Geteuid() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// TestTheAgentDeliversItsBranchWithoutACredential is issue 31's story
// through the real binaries: a local session of a task on a GitHub
// repository starts with a checkout of it on its own branch; the agent
// commits there, pushes through git_push (the orchestrator checks and
// audits the call, agentctl pushes with the connection's credential) and
// opens the pull request with create's default branch. The credential is
// in no file of the workspace; a rewritten history is refused, not
// forced; the stop keeps the work; the task's next session starts on
// the pull request's branch.
// workspaceWorld is an orchestrator on the local executor with a
// workspaces directory the agents' uids can traverse, and a workspace
// connected to a GitHub stand-in that serves its repositories over git.
type workspaceWorld struct {
	gh                      *forgetest.GitHub
	srv                     *orchestrator
	dataDir, workspaces, ws string
}

func newWorkspaceWorld(t *testing.T) workspaceWorld {
	t.Helper()
	w := workspaceWorld{gh: forgetest.NewGitHub(t, e2eGitHubToken, "octo-bot"),
		dataDir: filepath.Join(t.TempDir(), "data"), workspaces: testutil.TraversableDir(t)}
	w.srv = startServerEnv(t, w.dataDir, []string{"E2E_GH_TOKEN=" + e2eGitHubToken},
		"--agentctl", executortest.Agentctl(t), "--workspaces-dir", w.workspaces)
	w.ws = w.srv.id(t, "workspace", "workspace", "create", "acme")
	w.srv.ok(t, "workspace", "connect", w.ws, "--provider", "github", "--base-url", w.gh.URL, "--token-env", "E2E_GH_TOKEN")
	return w
}

// repo seeds a repository on the stand-in and adds it to the workspace:
// its id, and the commit on its branches.
func (w workspaceWorld) repo(t *testing.T, path string, files map[string]string, branches ...string) (id, commit string) {
	t.Helper()
	commit, err := w.gh.SeedRepo(path, files, branches...)
	require.NoError(t, err)
	return w.srv.id(t, "repository", "repo", "add", "--workspace", w.ws, "--provider", "github", "--host", "github.com", "--path", path), commit
}

func TestTheAgentDeliversItsBranchWithoutACredential(t *testing.T) {
	t.Parallel()
	w := newWorkspaceWorld(t)
	gh, srv, dataDir, workspaces, ws := w.gh, w.srv, w.dataDir, w.workspaces, w.ws
	repo, seed := w.repo(t, "acme/api", map[string]string{"README.md": "hello\n"}, "main")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", repo)
	sid := srv.launchLocal(t, task)
	branch := "toolscope/" + task + "/" + sid
	started := watchEvents(t, srv, task, func([]map[string]any) bool { return true }, "--kind", "session.started")
	assert.Contains(t, started[0]["message"], "1 of 1 repositories checked out on branch "+branch)

	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	assert.Equal(t, toolapi.WorkspaceSurface("github"), c.Names(t))

	dir := filepath.Join(workspaces, sid, "api")
	// The agent is told where its checkout is, and so is the user.
	info := callStructured[toolapi.TaskInfo](t, c, toolapi.TaskInfoTool, nil)
	require.Len(t, info.Repositories, 1)
	assert.Equal(t, dir, info.Repositories[0].LocalPath, "task_info's local_path is the checkout")
	sess := srv.session(t, sid)
	assert.Equal(t, filepath.Join(workspaces, sid), sess["workspace_dir"])
	checkouts := sess["checkouts"].([]any)
	require.Len(t, checkouts, 1)
	key := checkouts[0].(map[string]any)["key"]
	work := checkouts[0].(map[string]any)["work"]
	delete(checkouts[0].(map[string]any), "work")
	assert.Equal(t, map[string]any{"repository_id": repo, "key": key, "path": dir, "branch": branch}, checkouts[0],
		"session get shows the checkout")
	require.NotNil(t, work, "session get of a running session measures its work")
	assert.Equal(t, seed, work.(map[string]any)["head"])
	assert.NotEmpty(t, work.(map[string]any)["measure_time"])
	assert.Equal(t, [2]float64{0, 0}, workCounts(t, srv, sid), "nothing done yet")
	assert.Regexp(t, `/acme/api$`, key, "the mirror's key: the connection's host, then the repository's path")
	assert.Equal(t, branch, asOwner(t, dir, "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, seed, asOwner(t, dir, "rev-parse", "HEAD"), "made from the default branch")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "login.go"), []byte("package login\n"), 0o644))
	owner, err := os.Stat(dir)
	require.NoError(t, err)
	require.NoError(t, os.Chown(filepath.Join(dir, "login.go"), int(owner.Sys().(*syscall.Stat_t).Uid), int(owner.Sys().(*syscall.Stat_t).Gid)))
	assert.Equal(t, [2]float64{1, 0}, workCounts(t, srv, sid), "one new file")
	asOwner(t, dir, "add", "login.go")
	asOwner(t, dir, "commit", "-q", "-m", "fix login")
	commit := asOwner(t, dir, "rev-parse", "HEAD")
	assert.Equal(t, [2]float64{0, 1}, workCounts(t, srv, sid), "one commit, not pushed")

	pushed := callStructured[toolapi.PushResult](t, c, toolapi.GitPushTool, nil)
	assert.Equal(t, toolapi.PushResult{RepositoryID: repo, Branch: branch, Ref: "refs/heads/" + branch, Commit: commit}, pushed)
	head, ok := gh.Head("acme/api", branch)
	require.True(t, ok, "the branch is on the provider")
	assert.Equal(t, commit, head)
	main, _ := gh.Head("acme/api", "main")
	assert.Equal(t, seed, main, "nothing else moved")
	// The delivery is recorded with the session's checkout.
	checkouts = srv.session(t, sid)["checkouts"].([]any)
	require.Len(t, checkouts, 1)
	assert.Equal(t, commit, checkouts[0].(map[string]any)["delivered_commit"])
	assert.NotEmpty(t, checkouts[0].(map[string]any)["deliver_time"])
	assert.Equal(t, [2]float64{0, 0}, workCounts(t, srv, sid), "delivered: pushed")
	shown := srv.ok(t, "session", "get", sid)
	assert.Regexp(t, `(?m)^\s+`+regexp.QuoteMeta(key.(string))+`\s+`+regexp.QuoteMeta(branch)+`\s+`+regexp.QuoteMeta(dir)+`\s+`+commit[:12]+` at \S+ \S+\s+none, at `, shown)

	pr := callStructured[toolapi.ChangeRequest](t, c, toolapi.GitHubPRCreate, map[string]any{"title": "Fix login"})
	got, ok := gh.PullRequest("acme/api", int(pr.Number))
	require.True(t, ok)
	assert.Equal(t, branch, got.Head, "create's branch defaults to the session's")

	// A rewritten history is refused, and the provider's branch stays.
	asOwner(t, dir, "commit", "-q", "--amend", "-m", "rewritten")
	res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: toolapi.GitPushTool, Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	text := res.Content[0].(*mcp.TextContent).Text
	assert.Contains(t, text, toolapi.CodePushRejected)
	head, _ = gh.Head("acme/api", branch)
	assert.Equal(t, commit, head)

	// The credential is in no file of the workspace, nor in what the
	// agent was told.
	noTokenIn(t, filepath.Join(workspaces, sid))
	assert.NotContains(t, text, e2eGitHubToken)
	audit := watchEvents(t, srv, task, func(seen []map[string]any) bool { return len(seen) >= 4 }, "--kind", "tool.called")
	var pushes []string
	for _, e := range audit {
		assert.NotContains(t, fmt.Sprint(e), e2eGitHubToken)
		if strings.Contains(fmt.Sprint(e["message"]), toolapi.GitPushTool) {
			pushes = append(pushes, fmt.Sprint(e["message"]))
		}
	}
	assert.Len(t, pushes, 2, "both pushes are audited: %v", audit)

	// A stop keeps the work, and records what the remote lacks: the
	// rewritten commit, measured once the agent ended.
	srv.ok(t, "session", "stop", sid)
	assert.Equal(t, "rewritten", strings.TrimSpace(gitLog(t, dir)))
	assert.Equal(t, [2]float64{0, 1}, workCounts(t, srv, sid), "the stop recorded the unpushed commit")
	assert.Regexp(t, `0 uncommitted, 1 unpushed, at `, srv.ok(t, "session", "get", sid))
	// task get shows each session's checkout of the task's repository:
	// its branch, its delivery and what its stop recorded.
	assert.Regexp(t, `(?m)^\s+github\.com/acme/api\s+`+sid+`\s+stopped\s+`+regexp.QuoteMeta(branch)+`\s+`+regexp.QuoteMeta(dir)+`\s+`+
		commit[:12]+` at \S+ \S+\s+0 uncommitted, 1 unpushed, at `, srv.ok(t, "task", "get", task))
	keptDir := filepath.Join(workspaces, sid)

	// The task's next session starts on the work under review: its own
	// branch, made from the open pull request's.
	next := srv.launchLocal(t, task)
	nextDir := filepath.Join(workspaces, next, "api")
	assert.Equal(t, "toolscope/"+task+"/"+next, asOwner(t, nextDir, "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, commit, asOwner(t, nextDir, "rev-parse", "HEAD"), "made from the pull request's branch")
	running := srv.run(t, "session", "clean", next)
	assert.Equal(t, cli.ExitPrecondition, running.code, "a running session's workspace is not removed: %s", running.stdout)
	assert.Contains(t, running.stderr, "session stop "+next)
	srv.ok(t, "session", "stop", next)

	// Removing a workspace: refused while it holds what the provider
	// lacks, naming it; a running session's is refused; --discard removes it.
	refused := srv.run(t, "session", "clean", sid)
	require.Equal(t, cli.ExitPrecondition, refused.code, "%s", refused.stdout)
	assert.Contains(t, refused.stderr, key.(string)+" (branch "+branch+"): 0 uncommitted path(s) and 1 unpushed commit(s)")
	assert.Contains(t, refused.stderr, "--discard")
	assert.DirExists(t, keptDir)
	srv.ok(t, "session", "clean", sid, "--discard")
	assert.NoDirExists(t, keptDir)
	assert.Regexp(t, `workspace\s+`+regexp.QuoteMeta(keptDir)+` \(removed at `, srv.ok(t, "session", "get", sid))
	assert.NotEmpty(t, srv.session(t, sid)["workspace_remove_time"])
	srv.ok(t, "session", "clean", sid) // again: nothing to do
	_, err = os.Stat(filepath.Join(workspaces, next, "api", ".git"))
	require.NoError(t, err, "another session's workspace is untouched")
	// The next session delivered nothing of its own and left nothing: its
	// workspace goes without --discard.
	srv.ok(t, "session", "clean", next)
	assert.NoDirExists(t, filepath.Join(workspaces, next))
}

// workCounts is the uncommitted paths and unpushed commits session get
// shows for the session's one checkout.
// noTokenIn checks that no file under dir holds the GitHub stand-in's
// token.
func noTokenIn(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.NotContains(t, string(b), e2eGitHubToken, p)
		}
		return nil
	}))
}

func workCounts(t *testing.T, srv *orchestrator, sid string) [2]float64 {
	t.Helper()
	checkouts := srv.session(t, sid)["checkouts"].([]any)
	require.Len(t, checkouts, 1)
	work, ok := checkouts[0].(map[string]any)["work"].(map[string]any)
	require.True(t, ok, "no work measured: %v", checkouts[0])
	require.Empty(t, work["error"])
	n := func(k string) float64 { f, _ := work[k].(float64); return f }
	return [2]float64{n("uncommitted"), n("unpushed")}
}

// gitLog is the subject of dir's last commit, read as this process's user.
func gitLog(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", dir, "log", "-1", "--format=%s").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// TestARepositoryAttachedWhileTheAgentRunsIsCheckedOutInItsWorkspace: a
// batch that attaches a repository to a running session's task checks it
// out in the session's workspace, on the session's branch, as part of the
// push: the session's record, the event and task_info say where.
func TestARepositoryAttachedWhileTheAgentRunsIsCheckedOutInItsWorkspace(t *testing.T) {
	t.Parallel()
	w := newWorkspaceWorld(t)
	srv, dataDir, workspaces, ws := w.srv, w.dataDir, w.workspaces, w.ws
	api, _ := w.repo(t, "acme/api", map[string]string{"README.md": "api\n"}, "main")
	webRepo, web := w.repo(t, "acme/web", map[string]string{"index.html": "<p>web</p>\n"}, "trunk")
	task := srv.id(t, "task", "task", "create", "--workspace", ws, "--title", "one login for both", "--repo", api)
	sid := srv.launchLocal(t, task)
	branch := "toolscope/" + task + "/" + sid
	require.Len(t, srv.session(t, sid)["checkouts"], 1)

	srv.ok(t, "source", "add", task, "--repo", webRepo)
	pushed := watchEvents(t, srv, task, func(seen []map[string]any) bool {
		for _, e := range seen {
			if strings.Contains(fmt.Sprint(e["message"]), "2 of 2 repositories checked out") {
				return true
			}
		}
		return false
	}, "--kind", "providers.pushed")
	require.NotEmpty(t, pushed)
	dir := filepath.Join(workspaces, sid, "web")
	assert.Equal(t, branch, asOwner(t, dir, "rev-parse", "--abbrev-ref", "HEAD"), "on the session's branch")
	assert.Equal(t, web, asOwner(t, dir, "rev-parse", "HEAD"), "made from the default branch")
	var paths []string
	for _, c := range srv.session(t, sid)["checkouts"].([]any) {
		paths = append(paths, fmt.Sprint(c.(map[string]any)["repository_id"], " ", c.(map[string]any)["path"]))
	}
	assert.ElementsMatch(t, []string{api + " " + filepath.Join(workspaces, sid, "api"), webRepo + " " + dir}, paths)

	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "")
	info := callStructured[toolapi.TaskInfo](t, c, toolapi.TaskInfoTool, nil)
	local := map[string]string{}
	for _, r := range info.Repositories {
		local[r.ID] = r.LocalPath
	}
	assert.Equal(t, dir, local[webRepo], "task_info tells the agent where the new checkout is")
	srv.ok(t, "session", "stop", sid)
}
