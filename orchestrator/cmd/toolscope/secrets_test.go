package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	_ "modernc.org/sqlite"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/mcptest"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/forgetest"
)

// randomToken is a credential no text in the system could contain by
// chance: prefix plus n random letters and digits.
func randomToken(t *testing.T, prefix string, n int) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

// leakScanner is testutil.LeakScanner: each secret whole, its base64
// forms, and every fragment of fragmentLen bytes.
type leakScanner struct{ *testutil.LeakScanner }

const fragmentLen = testutil.LeakFragmentLen

func newLeakScanner(secrets map[string]string) *leakScanner {
	return &leakScanner{testutil.NewLeakScanner(secrets)}
}

func (s *leakScanner) find(data []byte) []string { return s.Find(data) }

// leakSources are the texts and files of a scenario, by name.
type leakSources struct {
	mu      sync.Mutex
	names   []string
	data    [][]byte
	byKind  map[string]int
	scanned map[string]bool // files read, by path
}

func (l *leakSources) add(kind, name string, data []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKind == nil {
		l.byKind = map[string]int{}
	}
	l.names = append(l.names, kind+": "+name)
	l.data = append(l.data, bytes.Clone(data))
	l.byKind[kind]++
}

// addTree reads every regular file under root as raw bytes, except the
// paths excluded (files that hold a secret by design); it returns the
// paths it excluded.
func (l *leakSources) addTree(t *testing.T, kind, root string, exclude func(string) bool) []string {
	t.Helper()
	var excluded []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if exclude(path) {
			excluded = append(excluded, path)
			return nil
		}
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err, path)
		l.add(kind, path, b)
		l.mu.Lock()
		if l.scanned == nil {
			l.scanned = map[string]bool{}
		}
		l.scanned[path] = true
		l.mu.Unlock()
		return nil
	}))
	return excluded
}

// TestSecretsAppearNowhere runs a full scenario against the real server
// process — connections to GitHub (credential by environment variable)
// and GitLab (credential by file), repositories, a task, a batch, a local
// session with the real agentctl, an agent calling every tool including
// failing ones (bad arguments, an unknown repository, a credential that
// no longer resolves, a revoked one, and every provider tool against
// providers that echo the credential header in their error bodies, with
// review comments holding pasted tokens; the poller meets those echoes
// too, in its log and in an event), operator mistakes that paste a
// token where a reference belongs, events watched, CLI commands with and
// without --json — and then scans every tool result, error, event, CLI
// output, the server's log and every file under the data directory (the
// SQLite database and its -wal and -shm files included, as raw bytes,
// while the server runs and after it stopped) for the credentials. Only
// the credential file itself, and each agentctl's launch secret file, may
// hold them; positive controls prove the scanner finds a planted leak.
func TestSecretsAppearNowhere(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ghToken := randomToken(t, "ghp_", 36)
	glToken := randomToken(t, "glpat-", 20)
	revoked := randomToken(t, "glpat-", 20)
	planted := randomToken(t, "ghp_", 36) // someone else's token, pasted in a review comment

	gh := forgetest.NewGitHub(t, ghToken, "octo-bot")
	gh.AddRepo("acme/api", "main", "fix-login")
	gh.AddRepo("acme/docs", "main", "fix-docs")
	gl := forgetest.NewGitLab(t, glToken, "gl-bot")
	gl.AddProject("acme/platform/web", "main", "fix-login")
	gl.AddUser("erin")

	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	credFile := filepath.Join(root, "secrets", "gitlab.token")
	require.NoError(t, os.MkdirAll(filepath.Dir(credFile), 0o700))
	writeCred := func(v string) { require.NoError(t, os.WriteFile(credFile, []byte(v+"\n"), 0o600)) }

	src := &leakSources{}
	// The orchestrator's environment holds the forges' tokens under their
	// usual names too, and a canary: none may reach an agent or agentctl.
	canary := randomToken(t, "canary", 32)
	passed := randomToken(t, "passed", 32)
	srv := startServerEnv(t, dataDir, []string{"SCAN_GH_TOKEN=" + ghToken, "GH_TOKEN=" + ghToken, "GITLAB_TOKEN=" + glToken,
		"SCAN_CANARY=" + canary, "SCAN_PASSED=" + passed},
		"--agentctl", executortest.Agentctl(t), "--poll-interval", "100ms", "--log-level", "debug", "--agent-env", "SCAN_PASSED")

	// The CLI, every output kept.
	run := func(args ...string) result {
		t.Helper()
		r := srv.run(t, args...)
		src.add("cli", strings.Join(args, " "), []byte(r.stdout+r.stderr))
		return r
	}
	ok := func(args ...string) string {
		t.Helper()
		r := run(args...)
		require.Equal(t, 0, r.code, "toolscope %v: %s", args, r.stderr)
		return r.stdout
	}
	fails := func(args ...string) string {
		t.Helper()
		r := run(args...)
		require.NotEqual(t, 0, r.code, "toolscope %v succeeded: %s", args, r.stdout)
		return r.stderr
	}
	id := func(object string, args ...string) string {
		t.Helper()
		var resp map[string]map[string]any
		require.NoError(t, json.Unmarshal([]byte(ok(append([]string{"--json"}, args...)...)), &resp))
		v, _ := resp[object]["id"].(string)
		require.NotEmpty(t, v, "no %s id", object)
		return v
	}

	ws := id("workspace", "workspace", "create", "acme")
	// Operator mistakes: a token where a reference or a URL belongs, a
	// variable that is not set, a revoked token in the file.
	fails("workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", ghToken)
	fails("workspace", "connect", ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-file", glToken)
	fails("workspace", "connect", ws, "--provider", "github", "--base-url",
		strings.Replace(gh.URL, "http://", "http://x-access-token:"+ghToken+"@", 1), "--token-env", "SCAN_GH_TOKEN")
	fails("workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL+"/?access_token="+ghToken, "--token-env", "SCAN_GH_TOKEN")
	fails("workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "SCAN_UNSET_TOKEN")
	writeCred(revoked)
	fails("workspace", "connect", ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-file", credFile)
	// The connections: by environment variable and by file.
	assert.Contains(t, ok("workspace", "connect", ws, "--provider", "github", "--base-url", gh.URL, "--token-env", "SCAN_GH_TOKEN"), "octo-bot")
	writeCred(glToken)
	ok("--json", "workspace", "connect", ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-file", credFile)
	assert.Contains(t, ok("workspace", "get", ws), credFile, "the reference is shown")
	ok("--json", "workspace", "get", ws)
	ok("workspace", "list")
	ok("--json", "workspace", "list")

	ghRepo := id("repository", "repo", "add", "--workspace", ws, "--provider", "github", "--host", "github.com", "--path", "acme/api")
	docsRepo := id("repository", "repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/docs.git")
	glRepo := id("repository", "repo", "add", "--workspace", ws, "--provider", "gitlab", "--host", "gitlab.com", "--path", "acme/platform/web")
	fails("repo", "add", "--workspace", ws, "--provider", "gitlab", "--url", "https://oauth2:"+glToken+"@gitlab.com/acme/other.git")
	fails("repo", "add", "--workspace", ws, "--provider", "github", "--url", "https://github.com/acme/other.git?token="+ghToken)
	ok("repo", "list", "--workspace", ws)
	ok("--json", "repo", "list", "--workspace", ws)
	ok("repo", "get", glRepo)

	task := id("task", "task", "create", "--workspace", ws, "--title", "fix login", "--repo", ghRepo)

	// Every event of the task, through the API, from the start.
	var (
		evMu   sync.Mutex
		events []*pb.TaskEvent
	)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	t.Cleanup(stopWatch)
	stream, err := pb.NewEventServiceClient(dial(t, srv.addr)).WatchTaskEvents(watchCtx, &pb.WatchTaskEventsRequest{TaskId: task})
	require.NoError(t, err)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			resp, err := stream.Recv()
			if err != nil {
				if watchCtx.Err() == nil {
					src.add("error", "WatchTaskEvents", []byte(err.Error()))
				}
				return
			}
			evMu.Lock()
			events = append(events, resp.GetEvent())
			evMu.Unlock()
		}
	}()
	waitEvent := func(what string, match func(*pb.TaskEvent) bool) uint64 {
		t.Helper()
		var seq uint64
		require.Eventually(t, func() bool {
			evMu.Lock()
			defer evMu.Unlock()
			for _, e := range events {
				if match(e) {
					seq = e.GetSequence()
					return true
				}
			}
			return false
		}, 2*time.Minute, 5*time.Millisecond, "no %s event", what)
		return seq
	}

	assert.Contains(t, ok("source", "add", task, "--repo", glRepo), "attached 1 repositories in one batch")
	fails("source", "add", task, "--repo", "repo_nope")
	ok("task", "get", task)
	ok("--json", "task", "get", task)
	ok("task", "providers", task)
	ok("task", "list", "--workspace", ws)
	ok("--json", "task", "list", "--workspace", ws)

	// The session runs an agent, which gets one more variable by name.
	agent := []string{"--env", "SCAN_PASSED", "--", "sleep", "600"}
	var dry plan
	require.NoError(t, json.Unmarshal([]byte(ok(append([]string{"--json", "session", "launch", task, "--executor", "local", "--dry-run"}, agent...)...)), &dry))
	var launched map[string]any
	require.NoError(t, json.Unmarshal([]byte(ok(append([]string{"--json", "session", "launch", task, "--executor", "local"}, agent...)...)), &launched))
	sid := launched["id"].(string)
	// The launch secret, read while the session runs: its stop removes it.
	secretFile := filepath.Join(dataDir, "sessions", sid, "secret")
	secretBytes, err := os.ReadFile(secretFile)
	require.NoError(t, err)

	// The process environments: agentctl's and the agent's, as
	// /proc/PID/environ has them.
	agentctl := agentctlPID(t, dataDir, sid)
	var agentPID int
	require.Eventually(t, func() bool { agentPID = childOf(agentctl); return agentPID != 0 }, time.Minute, 10*time.Millisecond, "the agent runs")
	environs := map[string][]byte{}
	for name, pid := range map[string]int{"agentctl": agentctl, "agent": agentPID} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		require.NoError(t, err)
		environs[name] = b
		src.add("process environment", name, b)
	}
	assert.Contains(t, string(environs["agent"]), "SCAN_PASSED="+passed, "--env NAME reaches the agent")
	assert.Contains(t, string(environs["agentctl"]), "SCAN_PASSED="+passed, "and its agentctl, to pass it on")
	assert.Contains(t, string(environs["agent"]), "TOOLSCOPE_MCP_TOKEN=", "the agent gets its MCP token")
	setByAgentctl := []string{"TOOLSCOPE_MCP_URL", "TOOLSCOPE_MCP_TOKEN", "TOOLSCOPE_MCP_CONFIG", "TOOLSCOPE_SESSION_ID", "TOOLSCOPE_TASK_ID", "HOME"}
	for _, kv := range strings.Split(strings.TrimRight(string(environs["agent"]), "\x00"), "\x00") {
		name, _, _ := strings.Cut(kv, "=")
		assert.True(t, slices.Contains(dry.PassEnv, name) || slices.Contains(setByAgentctl, name),
			"the agent has %s, which --dry-run did not list", name)
	}
	serverEnv, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", srv.cmd.Process.Pid))
	require.NoError(t, err)
	ok("session", "get", sid)
	ok("--json", "session", "list", task)
	ok("session", "list", task)
	ok("session", "mcp-config", sid)

	// The agent: an MCP client on the session's endpoint, every call kept.
	url, token := bridgeConfig(t, dataDir, sid)
	c := mcptest.Connect(t, mcptest.HTTP(url, token), "2025-11-25")
	c.Listen(t)
	require.Equal(t, toolapi.Surface("github", "gitlab"), c.Names(t))
	called := map[string]int{}
	call := func(tool string, args map[string]any) (text string, isErr bool) {
		t.Helper()
		called[tool]++
		res, err := c.Session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			src.add("tool error", tool, []byte(err.Error()))
			return err.Error(), true
		}
		b, err := json.Marshal(res)
		require.NoError(t, err)
		kind := "tool result"
		if res.IsError {
			kind = "tool error"
		}
		src.add(kind, tool, b)
		require.NotEmpty(t, res.Content, tool)
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	succeeds := func(tool string, args map[string]any) string {
		t.Helper()
		text, isErr := call(tool, args)
		require.False(t, isErr, "%s: %s", tool, text)
		return text
	}
	refused := func(code, tool string, args map[string]any) {
		t.Helper()
		text, isErr := call(tool, args)
		require.True(t, isErr, "%s succeeded: %s", tool, text)
		assert.True(t, strings.HasPrefix(text, code+":"), "%s: want %s, got %s", tool, code, text)
	}

	succeeds("task_info", nil)
	succeeds("session_info", nil)
	succeeds("task_inbox", nil)
	refused("no_change_request", toolapi.GitHubPRStatus, nil)
	refused("invalid_arguments", toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login"})
	refused("invalid_arguments", toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "x", "token": ghToken})
	refused("repository_not_attached", toolapi.GitHubPRCreate, map[string]any{"repository_id": "repo_nope", "branch": "fix-login", "title": "x"})
	refused("provider_mismatch", toolapi.GitLabMRCreate, map[string]any{"repository_id": ghRepo, "branch": "fix-login", "title": "x"})
	refused("provider_invalid", toolapi.GitHubPRCreate, map[string]any{"branch": "no-such-branch", "title": "x"})
	_, isErr := call("github_pr_merge_everything", map[string]any{})
	assert.True(t, isErr, "an unknown tool is refused")

	assert.Contains(t, succeeds(toolapi.GitHubPRCreate, map[string]any{"branch": "fix-login", "title": "Fix login"}), "#1")
	succeeds(toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix login", "draft": true})
	refused("already_exists", toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "again"})
	ghThread := strconv.FormatInt(gh.AddComment("acme/api", 1, "alice", "please add a test", "login.go", 10), 10)
	glThread := gl.AddDiscussion("acme/platform/web", 1, "frank", "rename this", "login.go", 4)
	for _, g := range []toolapi.Group{toolapi.GroupGitHub, toolapi.GroupGitLab} {
		succeeds(g.Like(toolapi.GitHubPRStatus), nil)
		succeeds(g.Like(toolapi.GitHubPRComments), nil)
		succeeds(g.Like(toolapi.GitHubPRAutomation), nil)
	}
	succeeds(toolapi.GitHubPRReply, map[string]any{"thread_id": ghThread, "body": "added"})
	succeeds(toolapi.GitLabMRReply, map[string]any{"thread_id": glThread, "body": "renamed"})
	refused("provider_not_found", toolapi.GitLabMRReply, map[string]any{"thread_id": "no-such-thread", "body": "?"})
	succeeds(toolapi.GitHubPRRequestReviewers, map[string]any{"reviewers": []string{"carol"}})
	succeeds(toolapi.GitLabMRRequestReviewers, map[string]any{"reviewers": []string{"erin"}})
	succeeds(toolapi.GitHubPRSetAutomation, map[string]any{"auto_fix_checks": true})
	succeeds(toolapi.GitLabMRSetAutomation, map[string]any{"prompt_on_merged": false})

	// A review requested from the workspace's GitLab user: the poller,
	// with the file credential, prompts the agent; the inbox has it.
	bot := gl.UserID("gl-bot")
	gl.Update("acme/platform/web", 1, func(m *forgetest.GitLabMR) { m.Reviewers = []int64{bot} })
	src.add("tool result", "log notification", []byte(c.WaitLog(t)))
	assert.Contains(t, succeeds("task_inbox", nil), "review")

	// The credential file goes away, then holds a revoked token: refused
	// with its code, the file named, the value nowhere. Then restored.
	require.NoError(t, os.Remove(credFile))
	refused("credential_unavailable", toolapi.GitLabMRStatus, nil)
	refused("credential_unavailable", toolapi.GitLabMRDiscussions, nil)
	writeCred(revoked)
	refused("provider_unauthorized", toolapi.GitLabMRStatus, nil)
	fails("--json", "workspace", "connect", ws, "--provider", "gitlab", "--base-url", gl.URL, "--token-file", credFile)
	writeCred(glToken)
	succeeds(toolapi.GitLabMRStatus, nil)

	// The agent's batch: a second GitHub repository; the same again and
	// an unknown one are refused; GitHub tools now need repository_id.
	succeeds("task_add_sources", map[string]any{"repository_ids": []string{docsRepo}})
	refused("already_exists", "task_add_sources", map[string]any{"repository_ids": []string{docsRepo}})
	refused("invalid_arguments", "task_add_sources", map[string]any{"repository_ids": []string{"repo_nope"}})
	refused("ambiguous_repository", toolapi.GitHubPRStatus, nil)
	succeeds(toolapi.GitHubPRStatus, map[string]any{"repository_id": ghRepo})
	succeeds(toolapi.GitHubPRAutomation, map[string]any{"repository_id": ghRepo})
	succeeds("task_info", nil)
	waitEvent("sources added by the agent", func(e *pb.TaskEvent) bool {
		return e.GetKind() == pb.TaskEventKind_TASK_EVENT_KIND_SOURCES_ADDED && slices.Contains(e.GetRepositoryIds(), docsRepo)
	})
	// Providers that echo the credential header in their error bodies, and
	// review comments holding tokens someone pasted: a third party's GitHub
	// token and the workspace's own credentials.
	gh.EchoCredentials(true)
	gl.EchoCredentials(true)
	gh.AddComment("acme/api", 1, "mallory", "works with "+planted+" or "+glToken, "login.go", 12)
	gl.AddDiscussion("acme/platform/web", 1, "mallory", "try "+ghToken+" and "+planted, "login.go", 8)
	assert.Contains(t, succeeds(toolapi.GitHubPRComments, map[string]any{"repository_id": ghRepo}), "review comments")
	succeeds(toolapi.GitLabMRDiscussions, nil)
	// Every provider tool through an error the provider writes (each path
	// is one only that tool requests, so the poller cannot take it).
	refused("provider_invalid", toolapi.GitHubPRCreate, map[string]any{"repository_id": docsRepo, "branch": "no-such-branch", "title": "x"})
	for _, c := range []struct {
		fail interface {
			FailNext(method, contains string, status, retryAfter int)
		}
		method, path string
		status       int
		code, tool   string
		args         map[string]any
	}{
		{gh, "GET", "/reviews", 403, "provider_forbidden", toolapi.GitHubPRStatus, map[string]any{"repository_id": ghRepo}},
		{gh, "GET", "/comments", 404, "provider_not_found", toolapi.GitHubPRComments, map[string]any{"repository_id": ghRepo}},
		{gh, "POST", "/comments", 422, "provider_invalid", toolapi.GitHubPRReply, map[string]any{"repository_id": ghRepo, "thread_id": ghThread, "body": "x"}},
		{gh, "POST", "/requested_reviewers", 409, "provider_invalid", toolapi.GitHubPRRequestReviewers, map[string]any{"repository_id": ghRepo, "reviewers": []string{"carol"}}},
		{gl, "GET", "/approvals", 403, "provider_forbidden", toolapi.GitLabMRStatus, nil},
		{gl, "GET", "/discussions", 404, "provider_not_found", toolapi.GitLabMRDiscussions, nil},
		{gl, "POST", "/discussions", 400, "provider_invalid", toolapi.GitLabMRReply, map[string]any{"thread_id": glThread, "body": "x"}},
		{gl, "GET", "/users", http.StatusTeapot, "provider_error", toolapi.GitLabMRRequestReviewers, map[string]any{"reviewers": []string{"erin"}}},
	} {
		c.fail.FailNext(c.method, c.path, c.status, 0)
		refused(c.code, c.tool, c.args)
	}
	// The poller meets the same providers: an echoed failure of the GitHub
	// poll goes to the log, a failed GitLab auto-merge becomes an event.
	gh.FailNext("GET", "/repos/acme/api/pulls/1", 403, 0)
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(srv.logs.String(), "\n") {
			if strings.Contains(line, "poll a change request") && strings.Contains(line, "Authorization: Bearer [redacted]") {
				return true
			}
		}
		return false
	}, 2*time.Minute, 10*time.Millisecond, "the poll's echoed failure is logged, scrubbed")
	gl.FailNext("PUT", "/merge", 403, 0)
	succeeds(toolapi.GitLabMRSetAutomation, map[string]any{"auto_merge": true})
	waitEvent("auto-merge failed", func(e *pb.TaskEvent) bool {
		return strings.Contains(e.GetMessage(), "auto-merge failed") && strings.Contains(e.GetMessage(), "PRIVATE-TOKEN: [redacted]")
	})
	echoed := []byte(strings.Join(append(gh.Echoed(), gl.Echoed()...), "\n"))

	for _, tool := range toolapi.Surface("github", "gitlab") {
		assert.NotZero(t, called[tool], "the agent called %s", tool)
	}

	ok("session", "stop", sid)
	ok("--json", "session", "get", sid)
	lastSeq := waitEvent("session ended", func(e *pb.TaskEvent) bool {
		return e.GetKind() == pb.TaskEventKind_TASK_EVENT_KIND_SESSION_ENDED && e.GetSessionId() == sid
	})

	// The events CLI, human and --json, up to the session's end.
	for _, jsonOut := range []bool{false, true} {
		args := []string{"--server", srv.addr, "events", "watch", task}
		if jsonOut {
			args = append([]string{"--json"}, args...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := command(ctx, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var out bytes.Buffer
		lines := bufio.NewScanner(stdout)
		seqRe := regexp.MustCompile(`^#(\d+) |"sequence":"?(\d+)`)
		for lines.Scan() {
			out.Write(append(lines.Bytes(), '\n'))
			m := seqRe.FindStringSubmatch(lines.Text())
			require.NotNil(t, m, "event line without a sequence: %s", lines.Text())
			n, _ := strconv.ParseUint(m[1]+m[2], 10, 64)
			if n >= lastSeq {
				break
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		_ = cmd.Wait()
		cancel()
		require.Contains(t, out.String(), strconv.FormatUint(lastSeq, 10), "the watch reached the session's end")
		src.add("cli", strings.Join(args[2:], " "), append(out.Bytes(), stderr.Bytes()...))
	}
	stopWatch()
	<-watchDone
	evMu.Lock()
	for _, e := range events {
		b, err := protojson.Marshal(e)
		require.NoError(t, err)
		src.add("event", strconv.FormatUint(e.GetSequence(), 10), b)
	}
	evMu.Unlock()

	// The files, while the server runs (the -wal and -shm files exist)
	// and after it stopped. Excluded by path: the credential file. The
	// stopped session's launch secret file is gone.
	launchSecrets := map[string]string{"agentctl launch secret": strings.TrimSpace(string(secretBytes))}
	assert.NoFileExists(t, secretFile, "the stopped session's launch secret is removed")
	exclude := func(path string) bool { return path == credFile }
	excluded := src.addTree(t, "file (server running)", root, exclude)
	db := filepath.Join(dataDir, "toolscope.db")
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		assert.True(t, src.scanned[f], "%s was scanned while the server ran", filepath.Base(f))
	}
	srv.stop(t)
	src.add("server log", "stderr", []byte(srv.logs.String()))
	src.addTree(t, "file (server stopped)", root, exclude)
	assert.ElementsMatch(t, []string{credFile}, excluded, "only the file that holds a secret by design is excluded")

	secrets := map[string]string{"github token": ghToken, "gitlab token": glToken, "revoked gitlab token": revoked, "planted token": planted, "canary": canary}
	for k, v := range launchSecrets {
		secrets[k] = v
	}
	scanner := newLeakScanner(secrets)

	// Positive controls: the scanner finds each secret where it is by
	// design, a fragment planted in text, and a token written into an
	// SQLite database (in its -wal file while the connection is open).
	credBytes, err := os.ReadFile(credFile)
	require.NoError(t, err)
	assert.Contains(t, scanner.find(credBytes), "gitlab token", "the credential file holds the token")
	assert.Contains(t, scanner.find(secretBytes), "agentctl launch secret", "the launch secret file, read while the session ran")
	// The providers did echo the credentials: their error bodies hold them.
	echoHits := scanner.find(echoed)
	assert.Contains(t, echoHits, "github token", "GitHub echoed its credential")
	assert.Contains(t, echoHits, "gitlab token", "GitLab echoed its credential")
	assert.Subset(t, scanner.find(serverEnv), []string{"github token", "gitlab token", "canary"}, "the orchestrator's own environment holds them")
	plantedDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(plantedDir, "leak.log"),
		[]byte("level=ERROR msg=\"call failed\" auth=Bearer..."+ghToken[10:10+fragmentLen]+"...\n"), 0o600))
	pdb, err := sql.Open("sqlite", filepath.Join(plantedDir, "leak.db")+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	_, err = pdb.Exec(`CREATE TABLE connections (id INTEGER PRIMARY KEY, credential TEXT)`)
	require.NoError(t, err)
	_, err = pdb.Exec(`INSERT INTO connections (credential) VALUES (?)`, revoked)
	require.NoError(t, err)
	control := &leakSources{}
	control.addTree(t, "planted", plantedDir, func(string) bool { return false })
	require.NoError(t, pdb.Close())
	plantedHits := map[string][]string{}
	for i, data := range control.data {
		if hits := scanner.find(data); len(hits) > 0 {
			plantedHits[filepath.Base(control.names[i])] = hits
		}
	}
	assert.Contains(t, plantedHits, "leak.log", "a planted fragment is found")
	assert.Contains(t, plantedHits["leak.log"], fmt.Sprintf("github token (bytes 10-%d)", 10+fragmentLen))
	dbHit := plantedHits["leak.db"] != nil || plantedHits["leak.db-wal"] != nil
	assert.True(t, dbHit, "a token in an SQLite file is found as raw bytes: %v", plantedHits)

	// The scan.
	var total int64
	occurrences := 0
	for i, data := range src.data {
		total += int64(len(data))
		if hits := scanner.find(data); len(hits) > 0 {
			occurrences += len(hits)
			assert.Empty(t, hits, "secret found in %s", src.names[i])
		}
	}
	assert.Greater(t, src.byKind["tool result"], 20)
	assert.Greater(t, src.byKind["tool error"], 10)
	assert.Greater(t, src.byKind["event"], 5)

	assert.Equal(t, 2, src.byKind["process environment"])
	testutil.Figure(t, "secrets scan", "%d sources, %d bytes scanned (%d tool results, %d tool errors incl. %d provider errors echoing the credential, "+
		"%d events, %d CLI outputs, %d process environments (agentctl, agent), 1 server log, %d file reads incl. the SQLite db/-wal/-shm) for %d secrets as %d needles: %d occurrences; "+
		"controls: found in the credential file, the launch secret file (read before the stop), %d echoing provider bodies, the orchestrator's environment, a planted fragment and a planted SQLite row; %s",
		len(src.data), total, src.byKind["tool result"], src.byKind["tool error"], len(gh.Echoed())+len(gl.Echoed()), src.byKind["event"], src.byKind["cli"],
		src.byKind["process environment"], src.byKind["file (server running)"]+src.byKind["file (server stopped)"], len(secrets), scanner.Needles(), occurrences,
		len(gh.Echoed())+len(gl.Echoed()), time.Since(start).Round(time.Millisecond))
}

// childOf returns a child process of pid, or 0.
func childOf(pid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			return child
		}
	}
	return 0
}
