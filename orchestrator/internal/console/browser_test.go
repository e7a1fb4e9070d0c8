package console_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolscope/toolscope/executors/executortest"
	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/testutil"
	"github.com/toolscope/toolscope/orchestrator/internal/catalog/catalogtest"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/standin"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.LeaveNothing(m, executortest.RemoveBuilds, catalogtest.RemoveBuilds))
}

// screenshots, when set, makes the browser test write its screenshots into
// docs/console (go test ./orchestrator/internal/console -run Browser
// -screenshots; make console-screenshots).
var screenshots = flag.Bool("screenshots", false, "write the browser test's screenshots to docs/console")

// world is an orchestrator with the console, a workspace connected to a
// GitHub stand-in (not to GitLab), a task on a GitHub repository with a
// running local session, an MCP server in the catalog, and API tokens of
// each role.
type world struct {
	console                   string
	conn                      *grpc.ClientConn
	wsID, taskID, sessionID   string
	gitlabRepo, libRepo       string
	tokens                    map[string]string // by role
	secrets                   map[string]string // every test secret, by label
	stopServer                func()
	catalogTool               string
	ghToken, mcpToken, mcpURL string
	serverDone                chan error
	gh                        *standin.GitHub
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{tokens: map[string]string{}, secrets: map[string]string{}, serverDone: make(chan error, 1)}
	gh := standin.NewGitHub("ghp_ConsoleTestStandInToken0123456789abcd", "console-bot")
	t.Cleanup(gh.Close)
	gh.AddRepo("acme/api", "main")
	t.Setenv("TOOLSCOPE_CONSOLE_TEST_GH", gh.Token)
	w.ghToken, w.gh = gh.Token, gh
	w.secrets["github token"] = gh.Token

	mcpServer := catalogtest.NewHTTPServer(t, catalogtest.HTTPOptions{})
	mcpServer.SetTools(catalogtest.ToolSpec{Name: "lookup", Description: "look a word up", ReadOnly: true,
		InputSchema: []byte(`{"type":"object","properties":{"word":{"type":"string"}}}`)})

	dir, err := os.MkdirTemp("", "tsc-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan server.Ready, 1)
	go func() {
		w.serverDone <- server.Run(ctx, server.Config{DataDir: dir, Agentctl: executortest.Agentctl(t), Console: "127.0.0.1:0"},
			func(r server.Ready) { ready <- r })
	}()
	var r server.Ready
	select {
	case r = <-ready:
	case err := <-w.serverDone:
		t.Fatalf("the server did not start: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the server did not start")
	}
	stopped := false
	w.stopServer = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-w.serverDone)
		}
	}
	t.Cleanup(w.stopServer)
	w.console = r.Console
	require.True(t, strings.HasPrefix(w.console, "http://127.0.0.1:"), w.console)

	w.conn, err = grpc.NewClient("unix://"+r.Socket, append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.conn.Close() })
	ws, err := pb.NewWorkspaceServiceClient(w.conn).CreateWorkspace(ctx, &pb.CreateWorkspaceRequest{Name: "platform"})
	require.NoError(t, err)
	w.wsID = ws.GetWorkspace().GetId()
	_, err = pb.NewWorkspaceServiceClient(w.conn).SetConnection(ctx, &pb.SetConnectionRequest{WorkspaceId: w.wsID, Provider: "github",
		ApiBaseUrl: gh.URL, Credential: &pb.CredentialRef{Source: &pb.CredentialRef_EnvVar{EnvVar: "TOOLSCOPE_CONSOLE_TEST_GH"}}})
	require.NoError(t, err)
	repos := pb.NewRepositoryServiceClient(w.conn)
	ghRepo, err := repos.CreateRepository(ctx, &pb.CreateRepositoryRequest{WorkspaceId: w.wsID, Provider: "github", Host: "github.com", Path: "acme/api"})
	require.NoError(t, err)
	glRepo, err := repos.CreateRepository(ctx, &pb.CreateRepositoryRequest{WorkspaceId: w.wsID, Provider: "gitlab", Host: "gitlab.com", Path: "acme/web"})
	require.NoError(t, err)
	w.gitlabRepo = glRepo.GetRepository().GetId()
	libRepo, err := repos.CreateRepository(ctx, &pb.CreateRepositoryRequest{WorkspaceId: w.wsID, Provider: "github", Host: "github.com", Path: "acme/lib"})
	require.NoError(t, err)
	w.libRepo = libRepo.GetRepository().GetId()
	task, err := pb.NewTaskServiceClient(w.conn).CreateTask(ctx, &pb.CreateTaskRequest{WorkspaceId: w.wsID, Title: "Fix the login bug",
		RepositoryId: ghRepo.GetRepository().GetId()})
	require.NoError(t, err)
	w.taskID = task.GetTask().GetId()

	for _, role := range []pb.Role{pb.Role_ROLE_VIEWER, pb.Role_ROLE_MEMBER, pb.Role_ROLE_ADMIN} {
		name := strings.ToLower(strings.TrimPrefix(role.String(), "ROLE_"))
		tok, err := pb.NewAuthServiceClient(w.conn).CreateAPIToken(ctx, &pb.CreateAPITokenRequest{Name: "console-" + name, Role: role, Ttl: durationpb.New(time.Hour)})
		require.NoError(t, err)
		w.tokens[name] = tok.GetSecret()
		w.secrets[name+" API token"] = tok.GetSecret()
	}

	srv, err := pb.NewCatalogServiceClient(w.conn).CreateMcpServer(ctx, &pb.CreateMcpServerRequest{Server: &pb.McpServer{Name: "dict",
		Transport: &pb.McpServer_Http{Http: &pb.HttpTransport{Url: mcpServer.URL}}}})
	require.NoError(t, err)
	require.Empty(t, srv.GetServer().GetDiscoveryError())
	w.catalogTool = "dict__lookup"

	sessions := pb.NewSessionServiceClient(w.conn)
	launched, err := sessions.LaunchSession(ctx, &pb.LaunchSessionRequest{TaskId: w.taskID, Executor: "local"})
	require.NoError(t, err)
	w.sessionID = launched.GetSession().GetId()
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = sessions.StopSession(stop, &pb.StopSessionRequest{SessionId: w.sessionID})
	})
	m, err := sessions.GetSessionMCP(ctx, &pb.GetSessionMCPRequest{SessionId: w.sessionID})
	require.NoError(t, err)
	w.mcpToken, w.mcpURL = m.GetBearerToken(), m.GetUrl()
	return w
}

// browser starts headless Chromium with a throwaway profile; it and its
// processes end with the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		testutil.SkipOrFailUnderCI(t, "no Chromium on PATH (apt-get install chromium)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 900),
		// Chromium's shared memory files (org.chromium.Chromium.*, in
		// TMPDIR with disable-dev-shm-usage) outlive a killed browser.
		chromedp.Env("TMPDIR=" + t.TempDir()),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	require.NoError(t, chromedp.Do(ctx)) // starts the browser, with no deadline
	t.Cleanup(func() { cancel(); cancelAlloc() })
	watchConsole(ctx)
	return ctx
}

// tab opens another tab of the same browser (same cookies).
func tab(t *testing.T, browserCtx context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	require.NoError(t, chromedp.Do(ctx))
	t.Cleanup(cancel)
	watchConsole(ctx)
	return ctx
}

// faults are what the pages' consoles reported that a correct page never
// does: an uncaught exception, or a refusal by the Content-Security-Policy
// (an inline script or style, eval).
var faults struct {
	sync.Mutex
	list []string
}

func watchConsole(ctx context.Context) {
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				faults.Lock()
				faults.list = append(faults.list, m.String())
				faults.Unlock()
			}
		}
	}()
}

// waitFor bounds every browser step: only a hang reaches it (a loaded
// 2-core machine runs Chromium beside every other test package).
const waitFor = 2 * time.Minute

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		html, _ := chromedp.Run(c, chromedp.OuterHTML(chromedp.CSS("main")))
		loc, _ := chromedp.Run(c, chromedp.Location())
		t.Fatalf("%v; the page at %s shows:\n%s", err, loc, html)
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	v, err := chromedp.Run(c, a)
	require.NoError(t, err)
	return v
}

// text reads an element's text in one evaluation, so a swap in between
// cannot pull the node away.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return run(t, ctx, chromedp.Evaluate[string](`(e => e ? e.textContent : "")(document.querySelector(`+strconv.Quote(sel)+`))`))
}

// pages keeps the HTML of every page the test saw, for the secrets scan.
type pages struct{ seen map[string]string }

func (p *pages) keep(t *testing.T, ctx context.Context, label string) {
	t.Helper()
	p.seen[label] = run(t, ctx, chromedp.OuterHTML(chromedp.CSS("html")))
}

func (p *pages) shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	require.NotEmpty(t, png)
	if *screenshots {
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "..", "docs", "console", name+".png"), png, 0o644))
	}
}

func login(t *testing.T, ctx context.Context, console, token string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(console+"/sessions"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		// From the keyboard: type the token and press Enter.
		chromedp.SendKeys(chromedp.CSS("#token"), token+"\r"),
		chromedp.WaitVisible(chromedp.CSS("[data-role]")),
	)
	loc := run(t, ctx, chromedp.Location())
	require.True(t, strings.HasSuffix(loc, "/sessions"), "after logging in: %s", loc)
}

func logout(t *testing.T, ctx context.Context, console string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(console+"/sessions"), chromedp.WaitVisible(chromedp.CSS(".who button")),
		chromedp.Click(chromedp.CSS(".who button")), chromedp.WaitVisible(chromedp.CSS("#token")))
}

// TestBrowser drives the console in headless Chromium: a member logs in,
// adds a batch and watches the session's tool list change without a
// reload, and sees a refused call arrive in the event stream; an admin
// enables and assigns a catalog tool, which the session then shows; a
// viewer finds the member's buttons greyed out, and the server refuses the
// viewer's forged POST. No page ever holds a test secret, but the MCP
// token a member asks to see.
func TestBrowser(t *testing.T) {
	w := newWorld(t)
	b := browser(t)
	p := &pages{seen: map[string]string{}}

	// Logged out: every page leads to the login form.
	do(t, b, chromedp.Navigate(w.console+"/sessions/"+w.sessionID), chromedp.WaitVisible(chromedp.CSS("#token")))
	p.keep(t, b, "login")
	p.shot(t, b, "login")
	do(t, b, chromedp.SendKeys(chromedp.CSS("#token"), "tsat_notatoken\r"), chromedp.WaitVisible(chromedp.CSS(".problem")))

	t.Run("member logs in and sees the session", func(t *testing.T) {
		login(t, b, w.console, w.tokens["member"])
		do(t, b, chromedp.WaitVisible(chromedp.CSS(`a[href="/sessions/`+w.sessionID+`"]`)))
		assert.Equal(t, "member", text(t, b, "[data-role]"))
		p.keep(t, b, "sessions")
		p.shot(t, b, "sessions")
	})

	session := tab(t, b)
	t.Run("a batch changes the session's tools live", func(t *testing.T) {
		do(t, session, chromedp.Navigate(w.console+"/sessions/"+w.sessionID),
			chromedp.WaitVisible(chromedp.CSS(`[data-tool="github_pr_create"]`)))
		names := run(t, session, chromedp.Evaluate[[]string](`[...document.querySelectorAll("[data-tool]")].map(e => e.dataset.tool)`))
		for _, n := range names {
			assert.False(t, strings.HasPrefix(n, "gitlab_"), "a GitHub-only task shows %s", n)
		}
		// The workspace: the task's GitHub repository on the session's
		// branch (the stand-in serves no git for it: not checked out,
		// and said so).
		assert.Equal(t, "toolscope/"+w.taskID+"/"+w.sessionID, text(t, session, "[data-checkout] [data-branch]"))
		assert.Contains(t, text(t, session, "[data-checkout] [data-checkout-state]"), "not checked out")
		// A mark that a reload would erase.
		run(t, session, chromedp.Evaluate[bool](`window.notReloaded = true`))
		p.keep(t, session, "session before the batch")

		task := tab(t, b)
		do(t, task, chromedp.Navigate(w.console+"/tasks/"+w.taskID),
			chromedp.WaitVisible(chromedp.CSS(`input[value="`+w.gitlabRepo+`"]`)))
		p.keep(t, task, "task")
		p.shot(t, task, "task")
		do(t, task, chromedp.Click(chromedp.CSS(`input[value="`+w.gitlabRepo+`"]`)),
			chromedp.Click(chromedp.CSS(`#add-sources button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-source="gitlab.com/acme/web"]`)))
		assert.Contains(t, text(t, task, "[data-providers]"), "github,gitlab")

		do(t, session, chromedp.WaitVisible(chromedp.CSS(`[data-tool="gitlab_mr_create"]`)))
		assert.True(t, run(t, session, chromedp.Evaluate[bool](`window.notReloaded === true`)), "the tool list changed without a reload")
		assert.Contains(t, text(t, session, "[data-applied]"), "generation 2")
		p.keep(t, session, "session after the batch")
		p.shot(t, session, "session")
	})

	t.Run("a refused call appears in the event stream", func(t *testing.T) {
		events := tab(t, b)
		do(t, events, chromedp.Navigate(w.console+"/tasks/"+w.taskID+"/events"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-kind="sources.added"]`)))
		agent := mcpClient(t, w.mcpURL, w.mcpToken)
		res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "gitlab_mr_create",
			Arguments: map[string]any{"branch": "fix-login", "title": "Fix the login bug"}})
		require.NoError(t, err)
		require.True(t, res.IsError, "the workspace has no GitLab connection")
		do(t, events, chromedp.WaitVisible(chromedp.CSS(`tr.failed[data-outcome="provider_not_connected"]`)))
		p.keep(t, events, "events")
		p.shot(t, events, "events")
	})

	t.Run("the MCP token only on an explicit show", func(t *testing.T) {
		assert.NotContains(t, p.seen["session after the batch"], w.mcpToken)
		do(t, session, chromedp.Click(chromedp.CSS(`button[data-action="show-session-mcp"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#mcp-json`)))
		shown := text(t, session, "#mcp-json")
		assert.Contains(t, shown, w.mcpToken, "a member who asks sees the token")
		assert.Contains(t, shown, w.mcpURL)
	})

	t.Run("the agent's log on demand", func(t *testing.T) {
		// The test's session runs agentctl alone, with no agent: the
		// service says so, in place.
		do(t, session, chromedp.Click(chromedp.CSS(`#log .button`)), chromedp.WaitVisible(chromedp.CSS(`#log .problem`)))
		assert.Contains(t, text(t, session, "#log .problem"), "runs no agent")
	})

	t.Run("a form asking for confirmation is sent only once confirmed", func(t *testing.T) {
		// As the "Discard and clean" button's: console.js asks, and a
		// "no" keeps the form from being sent.
		sent := func(answer bool) bool {
			return run(t, session, chromedp.Evaluate[bool](`(() => {
				window.confirm = () => `+strconv.FormatBool(answer)+`;
				const f = document.createElement("form");
				f.method = "post"; f.action = "/nowhere"; f.setAttribute("data-confirm", "Sure?");
				document.body.appendChild(f);
				let sent = false;
				window.addEventListener("submit", e => { sent = !e.defaultPrevented; e.preventDefault(); }, {once: true});
				f.requestSubmit();
				f.remove();
				return sent;
			})()`))
		}
		assert.False(t, sent(false), "declined: not sent")
		assert.True(t, sent(true), "confirmed: sent")
	})

	t.Run("a state-changing POST without the CSRF token is refused", func(t *testing.T) {
		status := run(t, session, chromedp.Evaluate[int](`fetch("/sessions/`+w.sessionID+`/stop", {method: "POST"}).then(r => r.status)`,
			chromedp.EvalAwaitPromise))
		assert.Equal(t, http.StatusForbidden, status)
	})

	t.Run("an admin enables and assigns a catalog tool", func(t *testing.T) {
		logout(t, b, w.console)
		login(t, b, w.console, w.tokens["admin"])
		do(t, b, chromedp.Navigate(w.console+"/workspaces"),
			chromedp.Click(chromedp.CSS(`button[data-action="test-connection"]`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
		assert.Contains(t, text(t, b, "#result"), "authenticates as console-bot")
		// The provider answers the next test with a rate limit: the
		// page says so, and for how long the connection is left alone.
		w.gh.FailNext("GET", "/user", http.StatusTooManyRequests, 120)
		do(t, b, chromedp.Click(chromedp.CSS(`button[data-action="test-connection"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-rate-limited]`)))
		assert.Contains(t, text(t, b, "#result"), "failed")
		p.keep(t, b, "workspaces")
		p.shot(t, b, "workspaces")
		do(t, b, chromedp.Navigate(w.console+"/catalog"), chromedp.WaitVisible(chromedp.CSS(`[data-tool-link="dict__lookup"]`)))
		do(t, b, chromedp.Click(chromedp.CSS(`button[data-action="test-mcp-server"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-test]`)))
		assert.Contains(t, text(t, b, "[data-test]"), "lists 1 tools (lookup)")
		do(t, b, chromedp.Click(chromedp.CSS(`button[data-action="refresh-mcp-server"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-counts]`)))
		assert.Contains(t, text(t, b, "[data-counts]"), "1 unchanged")
		do(t, b, chromedp.Click(chromedp.CSS(`button[data-action="enable-mcp-server"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-server="dict"][data-server-enabled="true"]`)))
		p.keep(t, b, "catalog")
		p.shot(t, b, "catalog")
		do(t, b, chromedp.Click(chromedp.CSS(`[data-tool-link="dict__lookup"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-enabled]`)),
			chromedp.Click(chromedp.CSS(`button[data-action="enable-catalog-tool"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-enabled="yes"]`)))
		do(t, b, chromedp.Click(chromedp.CSS(`button[data-action="assign-catalog-tool"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-assigned="`+w.wsID+`"]`)))
		p.keep(t, b, "catalog tool")
		p.shot(t, b, "catalog-tool")
		// The session's open page shows the tool without a reload.
		do(t, session, chromedp.WaitVisible(chromedp.CSS(`[data-tool="dict__lookup"]`)))
	})

	t.Run("an agent's batch waits for approval, approved in the console", func(t *testing.T) {
		do(t, b, chromedp.Navigate(w.console+"/tasks/"+w.taskID), chromedp.WaitVisible(chromedp.CSS(`#policy`)),
			chromedp.SetValue(chromedp.CSS(`#policy`), "approve"),
			chromedp.Click(chromedp.CSS(`button[data-action="set-source-policy"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-policy="approve"]`)))
		agent := mcpClient(t, w.mcpURL, w.mcpToken)
		res, err := agent.CallTool(context.Background(), &mcp.CallToolParams{Name: "task_add_sources",
			Arguments: map[string]any{"repository_ids": []string{w.libRepo}}})
		require.NoError(t, err)
		require.False(t, res.IsError, "held for approval, not refused")
		do(t, b, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`button[data-action="approve-source-request"]`)))
		p.keep(t, b, "task with a pending request")
		p.shot(t, b, "task-pending")
		do(t, b, chromedp.Click(chromedp.CSS(`button[data-action="approve-source-request"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-source="github.com/acme/lib"]`)))
		assert.Equal(t, 0, run(t, b, chromedp.Evaluate[int](`document.querySelectorAll('button[data-action="approve-source-request"]').length`)))
	})

	t.Run("a viewer cannot press what a member can", func(t *testing.T) {
		logout(t, b, w.console)
		login(t, b, w.console, w.tokens["viewer"])
		do(t, b, chromedp.Navigate(w.console+"/sessions/"+w.sessionID), chromedp.WaitVisible(chromedp.CSS(`[data-tool="github_pr_create"]`)))
		for _, action := range []string{"stop-session", "resume-session"} {
			disabled := run(t, b, chromedp.Evaluate[bool](`document.querySelector('button[data-action="`+action+`"]').disabled`))
			assert.True(t, disabled, "%s is greyed out for a viewer", action)
		}
		assert.Equal(t, 0, run(t, b, chromedp.Evaluate[int](`document.querySelectorAll('button[data-action="show-session-mcp"]').length`)))
		p.keep(t, b, "session as viewer")
		p.shot(t, b, "session-viewer")
		do(t, b, chromedp.Navigate(w.console+"/tasks/"+w.taskID), chromedp.WaitVisible(chromedp.CSS(`[data-policy]`)))
		p.keep(t, b, "task as viewer")
		// The forged POST: the viewer's own login and CSRF token, a
		// member's action. The server refuses it and the session runs on.
		status := run(t, b, chromedp.Evaluate[int](`fetch("/sessions/`+w.sessionID+`/stop", {method: "POST",
			headers: {"X-CSRF-Token": document.querySelector("input[name=csrf]").value}}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		assert.Equal(t, http.StatusForbidden, status)
		got, err := pb.NewSessionServiceClient(w.conn).GetSession(context.Background(), &pb.GetSessionRequest{SessionId: w.sessionID})
		require.NoError(t, err)
		assert.Equal(t, pb.SessionState_SESSION_STATE_RUNNING, got.GetSession().GetState())
		// Nor can it reach the admin's catalog.
		do(t, b, chromedp.Navigate(w.console+"/catalog"), chromedp.WaitVisible(chromedp.CSS(".problem")))
		assert.Contains(t, text(t, b, ".problem"), "needs admin")
	})

	t.Run("phone-sized, nothing overflows", func(t *testing.T) {
		phone := tab(t, b)
		do(t, phone, chromedp.EmulateViewport(390, 844), chromedp.Navigate(w.console+"/sessions/"+w.sessionID),
			chromedp.WaitVisible(chromedp.CSS(`[data-tool="github_pr_create"]`)))
		fits := run(t, phone, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
		assert.True(t, fits, "the session page fits a 390 px wide screen")
		p.shot(t, phone, "session-phone")
	})

	t.Run("no page holds a test secret", func(t *testing.T) {
		secrets := map[string]string{}
		for k, v := range w.secrets {
			secrets[k] = v
		}
		secrets["MCP bearer token"] = w.mcpToken
		scanner := testutil.NewLeakScanner(secrets)
		require.Greater(t, len(p.seen), 8)
		for label, html := range p.seen {
			assert.Empty(t, scanner.Find([]byte(html)), "page %q", label)
		}
	})

	t.Run("no page threw or broke its Content-Security-Policy", func(t *testing.T) {
		faults.Lock()
		defer faults.Unlock()
		assert.Empty(t, faults.list)
	})

	t.Run("the orchestrator stops: the open page says so", func(t *testing.T) {
		events := tab(t, b)
		do(t, events, chromedp.Navigate(w.console+"/tasks/"+w.taskID+"/events"), chromedp.WaitVisible(chromedp.CSS(`tr[data-kind="tool.called"]`)))
		stop, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := pb.NewSessionServiceClient(w.conn).StopSession(stop, &pb.StopSessionRequest{SessionId: w.sessionID})
		require.NoError(t, err)
		w.stopServer()
		do(t, events, chromedp.WaitVisible(chromedp.CSS(`#offline`)))
		p.shot(t, events, "unreachable")
	})
}

func mcpClient(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "console-test-agent", Version: "1"}, nil)
	s, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerRT{token}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
