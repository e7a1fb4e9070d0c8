// Package demo is `toolscope demo`, what `make run` runs: the orchestrator
// on embedded SQLite plus a guided scenario that shows the whole idea in a
// minute — a task on a GitHub repository, an agent session listing its
// tools over MCP, a GitLab repository attached in one batch, the single
// notifications/tools/list_changed and the new list, one GitHub and one
// GitLab tool call — and the workspace: the session's agent, a script,
// finds the task's repository checked out in its working directory on the
// session's own branch and commits a change, which git_push delivers
// (no credential in the agent's hands) and github_pr_create turns into a
// pull request. A hosted session (served by the orchestrator itself,
// for an agent that cannot run agentctl) on the same task gets the same
// change. Provider APIs are local stand-ins (package standin),
// and the output says so. The orchestrator then keeps running for the user
// to explore.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/grpcerr"
	"github.com/toolscope/toolscope/internal/toolapi"
	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/forge/standin"
	"github.com/toolscope/toolscope/orchestrator/internal/server"
)

// Options configure the demo.
type Options struct {
	Listen, DataDir, Agentctl string
	// Console, if set, serves the web console there (the CLI's default is
	// 127.0.0.1:0); the demo prints its URL and the file holding an admin
	// API token to log in with.
	Console string
	// Hosted, if set, serves hosted sessions there (the CLI's default is
	// 127.0.0.1:0); the demo attaches one next to its local session.
	Hosted string
	// Out receives the story (or JSON lines with JSON).
	Out  io.Writer
	JSON bool
	// Logger receives the orchestrator's logs; nil discards them.
	Logger *slog.Logger
	// SetContext, when set, makes the demo's server (unix:///path) the
	// CLI's current context once it is ready, so that the CLI reaches it
	// with no setup; the demo calls the returned Restore when it ends. Nil
	// (--no-context) leaves the CLI config alone: the demo prints the
	// export line instead.
	SetContext func(server string) (cli.DemoContext, error)
}

// Environment variables the demo's connections reference: the stand-ins'
// tokens, set in this process only.
const (
	githubTokenEnv = "TOOLSCOPE_DEMO_GITHUB_TOKEN"
	gitlabTokenEnv = "TOOLSCOPE_DEMO_GITLAB_TOKEN"
)

// teller prints the story, or the same facts as JSON lines.
type teller struct {
	out  io.Writer
	json bool
}

func (t teller) say(step string, facts map[string]any, format string, args ...any) {
	if t.json {
		facts["step"] = step
		b, _ := json.Marshal(facts)
		fmt.Fprintf(t.out, "%s\n", b)
		return
	}
	fmt.Fprintf(t.out, format+"\n", args...)
}

// Run plays the scenario and then serves until ctx ends.
func Run(ctx context.Context, opts Options) (err error) {
	// The demo's workspaces are throw-away whatever the data directory, in
	// a directory that a root orchestrator's agents, under uids of their
	// own, may traverse (a data directory is 0700): beside the data
	// directory the demo makes, or in one of their own.
	temp, workspaces := "", ""
	if opts.DataDir == "" {
		if temp, err = os.MkdirTemp("", "toolscope-demo-"); err != nil {
			return err
		}
		opts.DataDir, workspaces = filepath.Join(temp, "data"), filepath.Join(temp, "workspaces")
	} else {
		if temp, err = os.MkdirTemp("", "toolscope-demo-workspaces-"); err != nil {
			return err
		}
		workspaces = temp
	}
	// Removed last, once the server and its sessions are gone.
	defer func() {
		if rerr := os.RemoveAll(temp); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove the demo's directory: %w", rerr))
		}
	}()
	if err := os.Chmod(temp, 0o711); err != nil {
		return err
	}
	tell := teller{out: opts.Out, json: opts.JSON}
	tell.say("intro", map[string]any{}, "toolscope demo: an agent gets exactly the MCP tools its task can use.\n")

	gh := standin.NewGitHub(randomToken("ghp_"), "demo-bot")
	defer gh.Close()
	if _, err := gh.SeedRepo("acme/api", map[string]string{"README.md": "# acme/api\n", "login.go": loginGo}, "main"); err != nil {
		return fmt.Errorf("demo: the stand-in's repository (is git installed?): %w", err)
	}
	gl := standin.NewGitLab(randomToken("glpat-"), "demo-bot")
	defer gl.Close()
	if _, err := gl.SeedProject("acme/web", map[string]string{"README.md": "# acme/web\n"}, "main", "fix-login"); err != nil {
		return fmt.Errorf("demo: the stand-in's repository (is git installed?): %w", err)
	}
	_ = os.Setenv(githubTokenEnv, gh.Token)
	_ = os.Setenv(gitlabTokenEnv, gl.Token)
	tell.say("standins", map[string]any{"github": gh.URL, "gitlab": gl.URL},
		"Stand-in provider APIs on this machine (no real GitHub or GitLab is contacted):\n  GitHub  %s\n  GitLab  %s", gh.URL, gl.URL)

	// The server outlives ctx (a signal) until the demo's session is
	// stopped through it.
	serveCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan server.Ready, 1)
	served := make(chan error, 1)
	go func() {
		served <- server.Run(serveCtx, server.Config{Listen: opts.Listen, DataDir: opts.DataDir, WorkspacesDir: workspaces, Agentctl: opts.Agentctl,
			Console: opts.Console, Hosted: opts.Hosted, Logger: opts.Logger, PollInterval: 0}, func(r server.Ready) { ready <- r })
	}()
	// However the demo ends (but SIGKILL), the server has returned
	// before the data directory is removed.
	serverDone := false
	defer func() {
		if !serverDone {
			stopServer()
			err = errors.Join(err, <-served)
		}
	}()
	var r server.Ready
	select {
	case r = <-ready:
	case err := <-served:
		serverDone = true
		return err
	case <-ctx.Done():
		return nil
	}
	addr := "unix://" + r.Socket
	facts := map[string]any{"socket": r.Socket, "database": r.DBPath}
	if r.Addr != "" {
		facts["addr"] = r.Addr
	}
	tell.say("orchestrator", facts, "Orchestrator serving on %s (database %s)\n", addr, r.DBPath)
	if r.Console != "" {
		tokenFile, err := consoleToken(ctx, addr, opts.DataDir)
		if err != nil {
			return fmt.Errorf("demo: a console login: %w", err)
		}
		tell.say("console", map[string]any{"console": r.Console, "token_file": tokenFile},
			"Web console: %s\n  log in with the admin API token in %s (mode 0600; it is not printed)\n", r.Console, tokenFile)
	}

	// The CLI's context, undone however the demo ends (but SIGKILL).
	var cliCtx cli.DemoContext
	var contextErr error
	if opts.SetContext != nil {
		if cliCtx, contextErr = opts.SetContext(addr); contextErr == nil {
			defer func() {
				if rerr := cliCtx.Restore(); rerr != nil {
					err = errors.Join(err, fmt.Errorf("remove the CLI context %q from %s: %w", cliCtx.Name, cliCtx.Config, rerr))
				}
			}()
		}
	}
	tell.sayContext(addr, cliCtx, opts.SetContext == nil, contextErr)

	ids, err := scenario(ctx, addr, gh, gl, tell)
	for _, id := range ids[2:] {
		if id != "" {
			// The session's agentctl outlives the server by design: stop it
			// while the server still runs (and record the hosted one
			// stopped, revoking its token).
			defer func() { err = errors.Join(err, stopSession(addr, id)) }()
		}
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	where, export := fmt.Sprintf(" (the CLI context %q points there)", cliCtx.Name), ""
	if cliCtx.Name == "" {
		where, export = "", "  export TOOLSCOPE_ADDR="+addr+"\n"
	}
	tell.say("next", map[string]any{"server": addr, "context": cliCtx.Name, "workspace_id": ids[0], "task_id": ids[1], "session_id": ids[2]},
		"\nThe orchestrator keeps running. Its socket is yours only (mode 0600). In another terminal%[6]s, try:\n"+
			"%[5]s"+
			"  bin/toolscope task get %[3]s\n"+
			"  bin/toolscope events watch %[3]s\n"+
			"  bin/toolscope session mcp-config %[4]s   # attach any MCP client or inspector\n"+
			"  bin/toolscope task list --workspace %[2]s\n"+
			"Press Ctrl-C to stop.", addr, ids[0], ids[1], ids[2], export, where)
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		serverDone = true
		return err
	}
}

// consoleTokenTTL is the life of the demo's console token.
const consoleTokenTTL = 24 * time.Hour

// consoleToken creates an admin API token for logging in to the console
// and writes it to a 0600 file in the data directory, whose path it
// returns; the token itself is never printed.
func consoleToken(ctx context.Context, addr, dataDir string) (string, error) {
	conn, err := grpc.NewClient(addr, append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	resp, err := pb.NewAuthServiceClient(conn).CreateAPIToken(ctx, &pb.CreateAPITokenRequest{
		Name: fmt.Sprintf("demo-console-%d", time.Now().Unix()), Role: pb.Role_ROLE_ADMIN, Ttl: durationpb.New(consoleTokenTTL)})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, "console-token")
	if err := os.WriteFile(path, []byte(resp.GetSecret()+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// stopSessionTimeout bounds stopping the demo's session on the way out.
const stopSessionTimeout = 30 * time.Second

// stopSession stops the demo's session through the server at addr.
func stopSession(addr, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), stopSessionTimeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return fmt.Errorf("stop the demo's session %s: %w", id, err)
	}
	defer conn.Close()
	if _, err := pb.NewSessionServiceClient(conn).StopSession(ctx, &pb.StopSessionRequest{SessionId: id}); err != nil {
		return fmt.Errorf("stop the demo's session %s: %w", id, err)
	}
	return nil
}

// sayContext tells how the CLI finds the demo: through the context the
// demo made current, or (with --no-context, or when the config file could
// not be written) through the export line.
func (t teller) sayContext(addr string, c cli.DemoContext, skipped bool, err error) {
	switch {
	case c.Name != "":
		then := "then no context is current again"
		if c.Previous != "" {
			then = fmt.Sprintf("then %q is current again", c.Previous)
		}
		note := ""
		if len(c.Overridden) > 0 {
			note = fmt.Sprintf("\nNote: %s is set in this environment and beats the config file; unset it in the terminal you try the commands in.",
				strings.Join(c.Overridden, " and "))
		}
		t.say("context", map[string]any{"context": c.Name, "config": c.Config, "server": addr, "previous": c.Previous, "overridden_by": c.Overridden},
			"CLI context %q is current until the demo stops; %s.\n"+
				"Plain bin/toolscope commands reach this orchestrator with no setup (config file %s;\n"+
				"run the demo with --no-context to leave it alone).%s\n", c.Name, then, c.Config, note)
	case skipped:
		t.say("context", map[string]any{"context": "", "skipped": true, "export": "export TOOLSCOPE_ADDR=" + addr},
			"--no-context: the CLI config is left alone; point the CLI at the demo with\n  export TOOLSCOPE_ADDR=%s\n", addr)
	default:
		t.say("context", map[string]any{"context": "", "error": err.Error(), "export": "export TOOLSCOPE_ADDR=" + addr},
			"Could not make \"demo\" the CLI's current context (%v);\npoint the CLI at the demo with\n  export TOOLSCOPE_ADDR=%s\n", err, addr)
	}
}

// scenario plays the story and returns the workspace, task and session ids.
// The fourth is the hosted session's, if the orchestrator serves one.
func scenario(ctx context.Context, addr string, gh *standin.GitHub, gl *standin.GitLab, tell teller) (ids [4]string, err error) {
	conn, err := grpc.NewClient(addr, append(grpcerr.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		return ids, err
	}
	defer conn.Close()
	workspaces, repositories := pb.NewWorkspaceServiceClient(conn), pb.NewRepositoryServiceClient(conn)
	tasks, sessions := pb.NewTaskServiceClient(conn), pb.NewSessionServiceClient(conn)

	ws, err := workspaces.CreateWorkspace(ctx, &pb.CreateWorkspaceRequest{Name: fmt.Sprintf("demo-%d", time.Now().Unix())})
	if err != nil {
		return ids, err
	}
	wsID := ws.GetWorkspace().GetId()
	users := map[string]string{}
	for _, c := range []struct{ provider, url, env string }{{"github", gh.URL, githubTokenEnv}, {"gitlab", gl.URL, gitlabTokenEnv}} {
		resp, err := workspaces.SetConnection(ctx, &pb.SetConnectionRequest{WorkspaceId: wsID, Provider: c.provider, ApiBaseUrl: c.url,
			Credential: &pb.CredentialRef{Source: &pb.CredentialRef_EnvVar{EnvVar: c.env}}})
		if err != nil {
			return ids, err
		}
		users[c.provider] = resp.GetConnection().GetUsername()
	}
	tell.say("workspace", map[string]any{"workspace_id": wsID, "usernames": users},
		"1. Workspace %s, connected to both stand-ins; each token was checked: GitHub as %s, GitLab as %s.",
		wsID, users["github"], users["gitlab"])

	ghRepo, err := repositories.CreateRepository(ctx, &pb.CreateRepositoryRequest{WorkspaceId: wsID, Provider: "github", Host: "github.com", Path: "acme/api"})
	if err != nil {
		return ids, err
	}
	glRepo, err := repositories.CreateRepository(ctx, &pb.CreateRepositoryRequest{WorkspaceId: wsID, Provider: "gitlab", Host: "gitlab.com", Path: "acme/web"})
	if err != nil {
		return ids, err
	}
	task, err := tasks.CreateTask(ctx, &pb.CreateTaskRequest{WorkspaceId: wsID, Title: "Fix the login bug", RepositoryId: ghRepo.GetRepository().GetId()})
	if err != nil {
		return ids, err
	}
	taskID := task.GetTask().GetId()
	tell.say("task", map[string]any{"task_id": taskID, "providers": task.GetTask().GetProviderSet().GetProviders()},
		"2. Task %s, \"Fix the login bug\", on github.com/acme/api: its provider set is %s.",
		taskID, strings.Join(task.GetTask().GetProviderSet().GetProviders(), ","))

	launched, err := sessions.LaunchSession(ctx, &pb.LaunchSessionRequest{TaskId: taskID, Executor: "local",
		Agent: &pb.AgentSpec{Argv: []string{"sh", "-c", agentScript}}})
	if err != nil {
		return ids, fmt.Errorf("launch a local session (is agentctl built? 'make build'): %w", err)
	}
	sid := launched.GetSession().GetId()
	ids = [4]string{wsID, taskID, sid} // from here on, the session is the caller's to stop
	var checkout *pb.SessionCheckout
	for _, c := range launched.GetSession().GetCheckouts() {
		if c.GetRepositoryId() == ghRepo.GetRepository().GetId() {
			checkout = c
		}
	}
	if checkout == nil || checkout.GetError() != "" {
		return ids, fmt.Errorf("session %s has no checkout of github.com/acme/api: %s", sid, checkout.GetError())
	}
	endpoint, err := sessions.GetSessionMCP(ctx, &pb.GetSessionMCPRequest{SessionId: sid})
	if err != nil {
		return ids, err
	}
	agent, err := connectAgent(ctx, endpoint.GetUrl(), endpoint.GetBearerToken())
	if err != nil {
		return ids, err
	}
	defer agent.session.Close()
	before, err := agent.tools(ctx)
	if err != nil {
		return ids, err
	}
	tell.say("tools_before", map[string]any{"session_id": sid, "tools": before},
		"3. Session %s runs agentctl on the local executor. A scripted agent connects over MCP and lists %d tools:\n%s",
		sid, len(before), indent(before))

	// A hosted session: no agentctl, no agent; the orchestrator serves the
	// same surface at a URL, behind a token shown once.
	var remote *scripted
	if hosted, err := sessions.AttachSession(ctx, &pb.AttachSessionRequest{TaskId: taskID}); err == nil {
		ids[3] = hosted.GetSession().GetId()
		if remote, err = connectAgent(ctx, hosted.GetUrl(), hosted.GetBearerToken()); err != nil {
			return ids, err
		}
		defer remote.session.Close()
		tools, err := remote.tools(ctx)
		if err != nil {
			return ids, err
		}
		tell.say("hosted", map[string]any{"session_id": ids[3], "url": hosted.GetUrl(), "tools": tools},
			"   Hosted session %s: the orchestrator serves the same tools itself at %s\n"+
				"   (for an agent that cannot run agentctl; 'toolscope session attach TASK'); a second agent connects there and lists %d tools.",
			ids[3], hosted.GetUrl(), len(tools))
	} else if !errors.Is(err, errdefs.ErrUnavailable) {
		return ids, fmt.Errorf("attach a hosted session: %w", err)
	}

	added, err := tasks.AddSources(ctx, &pb.AddSourcesRequest{TaskId: taskID, RepositoryIds: []string{glRepo.GetRepository().GetId()}})
	if err != nil {
		return ids, err
	}
	notified := agent.waitChanged(5 * time.Second)
	after, err := agent.tools(ctx)
	if err != nil {
		return ids, err
	}
	ps := added.GetTask().GetProviderSet()
	if remote != nil {
		n := remote.waitChanged(5 * time.Second)
		tools, err := remote.tools(ctx)
		if err != nil {
			return ids, err
		}
		tell.say("hosted_after", map[string]any{"session_id": ids[3], "list_changed": n, "tools": tools},
			"   The hosted session's agent received %d notifications/tools/list_changed too, and now lists %d tools.", n, len(tools))
	}
	tell.say("tools_after", map[string]any{"providers": ps.GetProviders(), "generation": ps.GetGeneration(),
		"list_changed": notified, "tools": after, "new_tools": newTools(before, after)},
		"4. gitlab.com/acme/web is attached in one batch: providers %s (generation %d), pushed to the session.\n"+
			"   The agent received %d notifications/tools/list_changed and now lists %d tools; new:\n%s",
		strings.Join(ps.GetProviders(), ","), ps.GetGeneration(), notified, len(after), indent(newTools(before, after)))

	exited, err := agentExited(ctx, conn, taskID)
	if err != nil {
		return ids, err
	}
	pushed, err := agent.call(ctx, toolapi.GitPushTool, map[string]any{"repository_id": checkout.GetRepositoryId()})
	if err != nil {
		return ids, err
	}
	tell.say("workspace_work", map[string]any{"workspace_dir": launched.GetSession().GetWorkspaceDir(), "checkout": checkout.GetPath(),
		"branch": checkout.GetBranch(), "agent": exited, toolapi.GitPushTool: pushed},
		"5. The session's agent (a script) started in its workspace %s (removed when the demo stops),\n"+
			"   where acme/api is checked out on the session's own branch %s; it committed a fix there:\n     %s\n"+
			"   %s pushed it to the stand-in (agentctl pushed with a credential the agent never sees): %s",
		launched.GetSession().GetWorkspaceDir(), checkout.GetBranch(), exited, toolapi.GitPushTool, pushed)

	pr, err := agent.call(ctx, toolapi.GitHubPRCreate, map[string]any{"repository_id": checkout.GetRepositoryId(), "title": "Fix the login bug"})
	if err != nil {
		return ids, err
	}
	mr, err := agent.call(ctx, toolapi.GitLabMRCreate, map[string]any{"branch": "fix-login", "title": "Fix the login bug"})
	if err != nil {
		return ids, err
	}
	tell.say("calls", map[string]any{toolapi.GitHubPRCreate: pr, toolapi.GitLabMRCreate: mr},
		"6. The agent opens the pull request of its branch and a merge request on GitLab, answered by the\n   orchestrator through the stand-ins:\n   %s: %s\n   %s: %s",
		toolapi.GitHubPRCreate, pr, toolapi.GitLabMRCreate, mr)
	return ids, nil
}

// loginGo is the file the demo's agent fixes.
const loginGo = "package api\n\n// Login checks a password.\nfunc Login(user, password string) bool { return password != \"\" }\n"

// agentScript is the demo session's agent: in its working directory, the
// session's workspace, it finds acme/api on the session's branch and
// commits a fix there. It holds no credential, so it cannot push: its
// MCP client (the scenario) delivers through git_push.
const agentScript = `set -e
cd api
echo '// Login refuses an empty user too.' >> login.go
git -c user.name=demo-agent -c user.email=demo-agent@localhost commit -q -am 'Fix the login bug'
echo "committed $(git log -1 --format='%h %s') on $(git branch --show-current) in $(pwd)"`

// agentExitedTimeout bounds the wait for the demo's agent script.
const agentExitedTimeout = 30 * time.Second

// agentExited waits for the task's agent.exited event and returns the
// agent's last output line, or why it failed.
func agentExited(ctx context.Context, conn *grpc.ClientConn, taskID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, agentExitedTimeout)
	defer cancel()
	stream, err := pb.NewEventServiceClient(conn).WatchTaskEvents(ctx, &pb.WatchTaskEventsRequest{TaskId: taskID})
	if err != nil {
		return "", err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return "", fmt.Errorf("waiting for the session's agent to commit: %w", err)
		}
		if e := resp.GetEvent(); e.GetKind() == pb.TaskEventKind_TASK_EVENT_KIND_AGENT_EXITED {
			msg := strings.TrimSpace(e.GetMessage())
			if !strings.Contains(msg, "code 0") {
				return "", fmt.Errorf("the session's agent failed: %s", msg)
			}
			return msg[strings.LastIndex(msg, "\n")+1:], nil
		}
	}
}

// scripted is the demo's agent: an MCP client of the session.
type scripted struct {
	session *mcp.ClientSession
	changed chan struct{}
}

func connectAgent(ctx context.Context, url, token string) (*scripted, error) {
	a := &scripted{changed: make(chan struct{}, 16)}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolscope-demo-agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { a.changed <- struct{}{} },
	})
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient(token)}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to the session over MCP: %w", err)
	}
	a.session = s
	return a, nil
}

func (a *scripted) tools(ctx context.Context) ([]string, error) {
	res, err := a.session.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names, nil
}

// waitChanged counts list_changed notifications: it waits for the first,
// then a short quiet time for any more.
func (a *scripted) waitChanged(limit time.Duration) int {
	select {
	case <-a.changed:
	case <-time.After(limit):
		return 0
	}
	n := 1
	for {
		select {
		case <-a.changed:
			n++
		case <-time.After(300 * time.Millisecond):
			return n
		}
	}
}

func (a *scripted) call(ctx context.Context, name string, args map[string]any) (string, error) {
	res, err := a.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		return "", errors.New(name + ": " + text)
	}
	return text, nil
}

func newTools(before, after []string) []string {
	had := map[string]bool{}
	for _, n := range before {
		had[n] = true
	}
	var out []string
	for _, n := range after {
		if !had[n] {
			out = append(out, n)
		}
	}
	return out
}

func indent(names []string) string {
	return "     " + strings.Join(names, "\n     ")
}
