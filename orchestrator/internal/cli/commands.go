package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/profiles"
)

func (a *app) workspaceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "workspace", Aliases: []string{"ws"}, Short: "Manage workspaces and their provider connections"}
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a workspace", Args: ExactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.workspaces(conn).CreateWorkspace(ctx, &pb.CreateWorkspaceRequest{Name: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printWorkspace(w, resp.GetWorkspace()) })
			})
		},
	}
	get := &cobra.Command{
		Use: "get WORKSPACE", Short: "Show a workspace and its connections", Args: ExactArgs("WORKSPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.workspaces(conn).GetWorkspace(ctx, &pb.GetWorkspaceRequest{WorkspaceId: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printWorkspace(w, resp.GetWorkspace()) })
			})
		},
	}
	list := &cobra.Command{
		Use: "list", Short: "List workspaces", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				list, err := a.listWorkspaces(ctx, conn)
				if err != nil {
					return err
				}
				resp := &pb.ListWorkspacesResponse{Workspaces: list}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintln(w, "ID\tNAME\tCONNECTIONS")
					for _, ws := range resp.GetWorkspaces() {
						var conns []string
						for _, c := range ws.GetConnections() {
							conns = append(conns, c.GetProvider())
						}
						fmt.Fprintf(w, "%s\t%s\t%s\n", ws.GetId(), ws.GetName(), orDash(strings.Join(conns, ",")))
					}
				})
			})
		},
	}
	var provider, baseURL, tokenEnv, tokenFile string
	var noValidate bool
	connect := &cobra.Command{
		Use:   "connect WORKSPACE --provider github|gitlab (--token-env VAR | --token-file PATH)",
		Short: "Connect a workspace to a provider's API; the orchestrator checks the token and records who it belongs to",
		Long: `Connect a workspace to a provider's API. The credential is stored as a reference
(an environment variable of the orchestrator, or a file), never its value. The
orchestrator resolves it now and asks the provider's current-user endpoint who
it authenticates as; that username is recorded and shown by session_info.`,
		Args: ExactArgs("WORKSPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cred := &pb.CredentialRef{}
			switch {
			case tokenEnv != "" && tokenFile != "":
				return Usagef("give --token-env or --token-file, not both")
			case tokenEnv != "":
				cred.Source = &pb.CredentialRef_EnvVar{EnvVar: tokenEnv}
			case tokenFile != "":
				cred.Source = &pb.CredentialRef_FilePath{FilePath: tokenFile}
			default:
				return Usagef("give --token-env VAR or --token-file PATH: where the orchestrator reads the token")
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.workspaces(conn).SetConnection(ctx, &pb.SetConnectionRequest{
					WorkspaceId: args[0], Provider: provider, ApiBaseUrl: baseURL, Credential: cred, SkipValidation: noValidate,
				})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printConnection(w, resp.GetConnection()) })
			})
		},
	}
	connect.Flags().StringVar(&provider, "provider", "", "github or gitlab")
	connect.Flags().StringVar(&baseURL, "base-url", "", "API base URL for GitHub Enterprise or self-managed GitLab (default: the public API)")
	connect.Flags().StringVar(&tokenEnv, "token-env", "", "name of the environment variable holding the token")
	connect.Flags().StringVar(&tokenFile, "token-file", "", "absolute path of a file holding the token")
	mapFields(connect, "api_base_url", "--base-url")
	connect.Flags().BoolVar(&noValidate, "no-validate", false, "record the connection without asking the provider who the token belongs to")
	var dprovider string
	disconnect := &cobra.Command{
		Use: "disconnect WORKSPACE --provider github|gitlab", Short: "Remove a workspace's connection to a provider",
		Args: ExactArgs("WORKSPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.workspaces(conn).RemoveConnection(ctx, &pb.RemoveConnectionRequest{WorkspaceId: args[0], Provider: dprovider})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { fmt.Fprintf(w, "removed the %s connection of %s\n", dprovider, args[0]) })
			})
		},
	}
	disconnect.Flags().StringVar(&dprovider, "provider", "", "github or gitlab")
	cmd.AddCommand(create, get, list, connect, disconnect, a.setPolicyCmd())
	return cmd
}

func (a *app) repoCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "repo", Aliases: []string{"repository"}, Short: "Manage a workspace's repositories"}
	var in pb.CreateRepositoryRequest
	add := &cobra.Command{
		Use:   "add --workspace WORKSPACE --provider PROVIDER (--url URL | --host HOST --path PATH)",
		Short: "Add a repository to a workspace",
		Long: `Add a repository to a workspace. The provider is stored as given; only github and
gitlab (case-insensitive) give a task provider tools. Host and path are taken
from --url when not given.`,
		Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.warnProvider(in.Provider)
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.repositories(conn).CreateRepository(ctx, &in)
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printRepositories(w, []*pb.Repository{resp.GetRepository()}) })
			})
		},
	}
	add.Flags().StringVar(&in.WorkspaceId, "workspace", "", "workspace id")
	add.Flags().StringVar(&in.Provider, "provider", "", "github, gitlab, local, ... (stored as given)")
	add.Flags().StringVar(&in.Host, "host", "", "host, for example github.com")
	add.Flags().StringVar(&in.Path, "path", "", "owner/name, group/project path, or a local path")
	add.Flags().StringVar(&in.RemoteUrl, "url", "", "clone URL (https, ssh or git@host:path)")
	mapFields(add, "path", "--url", "remote_url", "--url")
	get := &cobra.Command{
		Use: "get REPOSITORY", Short: "Show a repository", Args: ExactArgs("REPOSITORY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.repositories(conn).GetRepository(ctx, &pb.GetRepositoryRequest{RepositoryId: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printRepositories(w, []*pb.Repository{resp.GetRepository()}) })
			})
		},
	}
	var ws string
	list := &cobra.Command{
		Use: "list [--workspace WORKSPACE]", Short: "List the repositories of every workspace, or of one", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				repos, err := a.listRepositories(ctx, conn, ws)
				if err != nil {
					return err
				}
				resp := &pb.ListRepositoriesResponse{Repositories: repos}
				return a.emit(resp, func(w io.Writer) { printRepositories(w, resp.GetRepositories()) })
			})
		},
	}
	list.Flags().StringVar(&ws, "workspace", "", "only this workspace's (default: every workspace's)")
	cmd.AddCommand(add, get, list)
	return cmd
}

func (a *app) taskCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "task", Short: "Manage tasks"}
	var in pb.CreateTaskRequest
	create := &cobra.Command{
		Use: "create --workspace WORKSPACE --title TITLE --repo REPOSITORY", Short: "Create a task on its primary repository",
		Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.tasks(conn).CreateTask(ctx, &in)
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printTask(w, resp.GetTask()) })
			})
		},
	}
	create.Flags().StringVar(&in.WorkspaceId, "workspace", "", "workspace id")
	create.Flags().StringVar(&in.Title, "title", "", "what the task is about")
	create.Flags().StringVar(&in.Description, "description", "", "longer description")
	create.Flags().StringVar(&in.RepositoryId, "repo", "", "primary repository id")
	mapFields(create, "repository_id", "--repo")
	get := &cobra.Command{
		Use: "get TASK", Short: "Show a task, its repositories, its provider set and its sessions' checkouts of them", Args: ExactArgs("TASK"),
		Long: `Show a task, its repositories and its provider set, and each checkout its sessions have
of its repositories: the session's branch, where it is, the last delivery (git_push) and the
work it held that the provider lacked when the session last stopped ('session get SESSION'
measures a running session's now). With --json, the task alone, as GetTask answers it; the
sessions' checkouts are 'session list --task TASK --json'.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.tasks(conn).GetTask(ctx, &pb.GetTaskRequest{TaskId: args[0]})
				if err != nil {
					return err
				}
				if a.json {
					return a.emit(resp, nil)
				}
				// The sessions as their records have them: listing them
				// measures no workspace.
				sessions, err := a.listSessions(ctx, conn, resp.GetTask().GetId())
				if err != nil {
					msg, _ := describe(cmd, err)
					a.warnf("the task's sessions could not be listed, so their checkouts are not shown: %s", msg)
				}
				return a.emit(resp, func(w io.Writer) {
					printTask(w, resp.GetTask())
					printTaskCheckouts(w, resp.GetTask(), sessions)
				})
			})
		},
	}
	providersCmd := &cobra.Command{
		Use:   "providers TASK",
		Short: "Print a task's provider set, for example github,gitlab (none when empty)",
		Args:  ExactArgs("TASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.tasks(conn).GetTask(ctx, &pb.GetTaskRequest{TaskId: args[0]})
				if err != nil {
					return err
				}
				ps := resp.GetTask().GetProviderSet()
				return a.emit(ps, func(w io.Writer) { fmt.Fprintln(w, providerList(ps)) })
			})
		},
	}
	var ws string
	list := &cobra.Command{
		Use: "list [--workspace WORKSPACE]", Short: "List the tasks of every workspace, or of one", Args: ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				tasks, err := a.listTasks(ctx, conn, ws)
				if err != nil {
					return err
				}
				resp := &pb.ListTasksResponse{Tasks: tasks}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintln(w, "ID\tWORKSPACE\tTITLE\tREPOSITORIES\tPROVIDERS")
					for _, t := range resp.GetTasks() {
						fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", t.GetId(), t.GetWorkspaceId(), t.GetTitle(), len(t.GetRepositories()), providerList(t.GetProviderSet()))
					}
				})
			})
		},
	}
	list.Flags().StringVar(&ws, "workspace", "", "only this workspace's (default: every workspace's)")
	cmd.AddCommand(create, get, providersCmd, list)
	return cmd
}

func (a *app) sourceCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "source", Short: "Attach repositories to tasks"}
	var repos []string
	add := &cobra.Command{
		Use:   "add TASK --repo REPOSITORY [--repo REPOSITORY ...]",
		Short: "Attach several repositories to a task as one batch: all of them or none",
		Args:  ExactArgs("TASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.tasks(conn).AddSources(ctx, &pb.AddSourcesRequest{TaskId: args[0], RepositoryIds: repos})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					fmt.Fprintf(w, "attached %d repositories in one batch\n", len(repos))
					printTask(w, resp.GetTask())
					printPushes(w, resp.GetPushes())
				})
			})
		},
	}
	add.Flags().StringSliceVar(&repos, "repo", nil, "repository id; repeat or separate with commas")
	mapFields(add, "repository_ids", "--repo")
	cmd.AddCommand(add)
	cmd.AddCommand(a.sourceRequestCmds()...)
	return cmd
}

func (a *app) sessionCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "session", Short: "Run agents on tasks"}
	var (
		executor, mode, workdir, image string
		profile, modelName, credEnv    string
		auth                           string
		passEnv                        []string
		dryRun, modelUnchecked         bool
	)
	launch := &cobra.Command{
		Use:   "launch TASK --executor local|docker|remote|kubernetes [--mode task|plan] [-- AGENT COMMAND...]",
		Short: "Launch an agent session on a task",
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0 || dash == 0:
				return Usagef("session launch takes the task id before any '--'")
			case dash == -1 && len(args) > 1, dash > 1:
				return Usagef("session launch takes one task id; put the agent command after '--' (got %q)", args[1])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			m, ok := map[string]pb.SessionMode{"": pb.SessionMode_SESSION_MODE_UNSPECIFIED, "task": pb.SessionMode_SESSION_MODE_TASK, "plan": pb.SessionMode_SESSION_MODE_PLAN}[mode]
			if !ok {
				return Usagef("invalid --mode %q: use task or plan", mode)
			}
			agent := &pb.AgentSpec{Argv: args[1:], WorkingDir: workdir, Profile: profile, Model: modelName, CredentialEnv: credEnv, PassEnv: passEnv, Auth: auth}
			unchecked, err := resolveAgent(cmd, agent, modelUnchecked)
			if err != nil {
				return err
			}
			req := &pb.LaunchSessionRequest{TaskId: args[0], Executor: executor, Mode: m, Image: image, DryRun: dryRun, Agent: agent,
				ModelUnchecked: unchecked}
			if dryRun {
				return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
					resp, err := a.sessions(conn).LaunchSession(ctx, req)
					if err != nil {
						return err
					}
					// A refusal the launch would meet is part of the report
					// (refused), not an error: the dry run starts nothing.
					return a.emit(resp.GetPlan(), func(w io.Writer) { printPlan(w, resp.GetPlan()) })
				})
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				stream, err := a.sessions(conn).StartSession(ctx, &pb.StartSessionRequest{Launch: req})
				if err != nil {
					return err
				}
				// Progress goes to stderr, so stdout holds only the result.
				for {
					resp, err := stream.Recv()
					if err != nil {
						return err
					}
					if p := resp.GetProgress(); p != "" {
						fmt.Fprintf(a.stderr, "  %s\n", p)
						continue
					}
					if s := resp.GetSession(); s != nil {
						return a.emit(s, func(w io.Writer) { printSession(w, s) })
					}
				}
			})
		},
	}
	launch.Flags().StringVar(&executor, "executor", "local", "local, docker, remote or kubernetes")
	launch.Flags().StringVar(&mode, "mode", "", "task (default) or plan")
	launch.Flags().StringVar(&workdir, "workdir", "", "agent working directory")
	launch.Flags().StringVar(&image, "image", "", "container image (docker and kubernetes executors)")
	launch.Flags().StringVar(&profile, "agent", "", "agent profile: claude-code, codex or command (writes the MCP config that agent reads), or a named agent of the config file")
	launch.Flags().StringVar(&modelName, "model", "", "model for the agent profile (a name the profile knows, unless --model-unchecked)")
	launch.Flags().BoolVar(&modelUnchecked, "model-unchecked", false, "pass --model as it is, even a name the profile does not know (a gateway's, or a newer model)")
	launch.Flags().StringVar(&auth, "auth", "", "how the agent pays for its model: "+profiles.AuthAPIKey+" (the default: a key variable of the executor's environment, which must be set) "+
		"or "+profiles.AuthSubscription+" (the agent's own login: no key variable passes, even one that is set)")
	launch.Flags().StringVar(&credEnv, "credential-env", "", "name of the environment variable holding the model API key, with --auth api-key (default per profile)")
	launch.Flags().StringArrayVar(&passEnv, "env", nil, "NAME of a variable of the executor's environment the agent gets as well; repeatable (the value is never stored or shown)")
	mapFields(launch, "agent.pass_env", "--env", "agent.working_dir", "--workdir", "agent.profile", "--agent", "agent.model", "--model",
		"agent.credential_env", "--credential-env", "agent.auth", "--auth", "agent.argv", "AGENT COMMAND")
	launch.Flags().BoolVar(&dryRun, "dry-run", false, "print exactly what would be started and the whole environment allowlist, and start nothing")

	one := func(use, short string, rpc func(context.Context, pb.SessionServiceClient, string) (*pb.Session, error)) *cobra.Command {
		return &cobra.Command{
			Use: use + " SESSION", Short: short, Args: ExactArgs("SESSION"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
					s, err := rpc(ctx, a.sessions(conn), args[0])
					if err != nil {
						return err
					}
					return a.emit(s, func(w io.Writer) { printSession(w, s) })
				})
			},
		}
	}
	resume := one("resume", "Resume a stopped or failed session, pushing the task's current provider set",
		func(ctx context.Context, c pb.SessionServiceClient, id string) (*pb.Session, error) {
			r, err := c.ResumeSession(ctx, &pb.ResumeSessionRequest{SessionId: id})
			return r.GetSession(), err
		})
	var discard, discardStop bool
	stop := one("stop", "Stop a session (stopping a stopped session succeeds); where the stop ends its workspace (kubernetes), refused while a checkout holds work its provider lacks, unless --discard",
		func(ctx context.Context, c pb.SessionServiceClient, id string) (*pb.Session, error) {
			r, err := c.StopSession(ctx, &pb.StopSessionRequest{SessionId: id, Discard: discardStop})
			return r.GetSession(), err
		})
	stop.Flags().BoolVar(&discardStop, "discard", false, "stop even if the workspace that ends with the session holds uncommitted or unpushed work")
	clean := one("clean", "Remove a stopped session's workspace; refused while a checkout holds work its provider lacks, unless --discard",
		func(ctx context.Context, c pb.SessionServiceClient, id string) (*pb.Session, error) {
			r, err := c.CleanSession(ctx, &pb.CleanSessionRequest{SessionId: id, Discard: discard})
			return r.GetSession(), err
		})
	clean.Flags().BoolVar(&discard, "discard", false, "remove the workspace even if it holds uncommitted or unpushed work")
	get := one("get", "Show a session, its pushed provider set, whether it needs repair, and its workspace",
		func(ctx context.Context, c pb.SessionServiceClient, id string) (*pb.Session, error) {
			r, err := c.GetSession(ctx, &pb.GetSessionRequest{SessionId: id})
			return r.GetSession(), err
		})
	var listTask, listState string
	list := &cobra.Command{
		Use: "list [--task TASK] [--state STATE]", Short: "List the sessions of every task, or of one",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 || len(args) == 1 && listTask != "" {
				return Usagef("session list takes the task as --task TASK (or one argument), got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				listTask = args[0]
			}
			state, ok := sessionStateNamed(listState)
			if !ok {
				return Usagef("invalid --state %q: use pending, running, stopped or failed", listState)
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				all, err := a.listSessions(ctx, conn, listTask)
				if err != nil {
					return err
				}
				resp := &pb.ListSessionsResponse{}
				for _, s := range all {
					if state == pb.SessionState_SESSION_STATE_UNSPECIFIED || s.GetState() == state {
						resp.Sessions = append(resp.Sessions, s)
					}
				}
				return a.emit(resp, func(w io.Writer) { printSessions(w, resp.GetSessions()) })
			})
		},
	}
	list.Flags().StringVar(&listTask, "task", "", "only this task's sessions (default: every task's)")
	list.Flags().StringVar(&listState, "state", "", "only sessions in this state: pending, running, stopped or failed")
	mcpConfig := &cobra.Command{
		Use: "mcp-config SESSION", Short: "Print how to attach any MCP client or inspector to a running session",
		Args: ExactArgs("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.sessions(conn).GetSessionMCP(ctx, &pb.GetSessionMCPRequest{SessionId: args[0]})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) { printMCPConfig(w, args[0], resp) })
			})
		},
	}
	var follow, agentLog, agentctlLog bool
	logs := &cobra.Command{
		Use:   "logs SESSION [--agent|--agentctl] [--follow]",
		Short: "Print a session's agent log (its last 1 MiB, scrubbed; running sessions, every executor) or, with --agentctl, its agentctl's (local sessions whatever their state, docker ones while their container exists); --follow until it ends (JSON lines with --json)",
		Args:  ExactArgs("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			which := pb.SessionLog_SESSION_LOG_AGENT
			switch {
			case agentLog && agentctlLog:
				return Usagef("--agent and --agentctl name different logs; give one")
			case agentctlLog:
				which = pb.SessionLog_SESSION_LOG_AGENTCTL
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !follow {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, a.timeout)
				defer cancel()
			}
			conn, err := a.dial(ctx, cmd)
			if err != nil {
				return err
			}
			stream, err := a.sessions(conn).ReadSessionLog(ctx, &pb.ReadSessionLogRequest{SessionId: args[0], Follow: follow, Log: which})
			if err != nil {
				return err
			}
			for {
				resp, err := stream.Recv()
				switch {
				case errors.Is(err, io.EOF) || (err != nil && follow && ctx.Err() != nil):
					return nil
				case err != nil:
					return err
				}
				if a.json {
					b, err := marshalJSON(resp, "")
					if err != nil {
						return err
					}
					fmt.Fprintf(a.stdout, "%s\n", b)
				} else {
					fmt.Fprint(a.stdout, resp.GetText())
				}
			}
		},
	}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "go on printing what is written until the agent (or agentctl) ends, the session stops or you interrupt")
	logs.Flags().BoolVar(&agentLog, "agent", false, "the agent's output (the default)")
	logs.Flags().BoolVar(&agentctlLog, "agentctl", false, "the session's agentctl's own log (local and docker executors)")
	var attachMode string
	attach := &cobra.Command{
		Use:   "attach TASK [--mode task|plan]",
		Short: "Open a hosted session on a task: the orchestrator serves its tools at a URL, for an agent that runs elsewhere (prints the URL and a bearer token, shown once)",
		Long: `Open a hosted session on a task. The orchestrator itself serves the task's tools over
streamable HTTP (toolscope serve --hosted ADDR), for an agent that cannot run agentctl next to
it: an IDE on a laptop, a hosted agent that can only reach a URL. No agentctl and no agent is
started. The bearer token is printed this once (the orchestrator keeps only its SHA-256); it is
refused once the session is stopped ('toolscope session stop SESSION').`,
		Args: ExactArgs("TASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, ok := map[string]pb.SessionMode{"": pb.SessionMode_SESSION_MODE_UNSPECIFIED, "task": pb.SessionMode_SESSION_MODE_TASK, "plan": pb.SessionMode_SESSION_MODE_PLAN}[attachMode]
			if !ok {
				return Usagef("invalid --mode %q: use task or plan", attachMode)
			}
			return a.call(cmd, func(ctx context.Context, conn *grpc.ClientConn) error {
				resp, err := a.sessions(conn).AttachSession(ctx, &pb.AttachSessionRequest{TaskId: args[0], Mode: m})
				if err != nil {
					return err
				}
				return a.emit(resp, func(w io.Writer) {
					printSessions(w, []*pb.Session{resp.GetSession()})
					fmt.Fprintln(w)
					printMCPConfig(w, resp.GetSession().GetId(), &pb.GetSessionMCPResponse{Url: resp.GetUrl(), BearerToken: resp.GetBearerToken()})
					fmt.Fprintln(w, "The token is shown this once; 'toolscope session stop "+resp.GetSession().GetId()+"' revokes it.")
				})
			})
		},
	}
	attach.Flags().StringVar(&attachMode, "mode", "", "task (default) or plan (read-only tools only)")
	cmd.AddCommand(launch, attach, resume, stop, clean, get, list, mcpConfig, logs)
	return cmd
}

func printPlan(w io.Writer, p *pb.LaunchPlan) {
	defer func() {
		if p.GetRefused() != "" {
			fmt.Fprintf(w, "would be refused\t%s\n", p.GetRefused())
		}
	}()
	fmt.Fprintf(w, "would start\t%s\n", shellJoin(p.GetArgv()))
	for _, k := range slices.Sorted(maps.Keys(p.GetEnv())) {
		fmt.Fprintf(w, "  env\t%s=%s\n", k, shellQuote(p.GetEnv()[k]))
	}
	fmt.Fprintf(w, "  env\tTOOLSCOPE_MCP_URL, TOOLSCOPE_MCP_TOKEN, TOOLSCOPE_MCP_CONFIG, TOOLSCOPE_SESSION_ID, TOOLSCOPE_TASK_ID (set by agentctl; HOME too, the session directory, when the agent runs under a uid of its own)\n")
	fmt.Fprintf(w, "  passes through\t%s (names only; values come from the executor's environment, nothing else of it reaches the agent)\n",
		strings.Join(p.GetPassEnv(), ", "))
	for _, f := range p.GetFiles() {
		fmt.Fprintf(w, "writes %s:\n%s", f.GetPath(), f.GetContent())
	}
}

func printMCPConfig(w io.Writer, id string, m *pb.GetSessionMCPResponse) {
	if m.GetBearerToken() == "" {
		// A hosted session's token is shown once, by session attach.
		m = &pb.GetSessionMCPResponse{Url: m.GetUrl(), BearerToken: "<the token 'session attach' printed>", StdioCommand: m.GetStdioCommand()}
	}
	fmt.Fprintf(w, "MCP endpoint of session %s (streamable HTTP; the token is this session's only)\n", id)
	fmt.Fprintf(w, "  url\t%s\n", m.GetUrl())
	fmt.Fprintf(w, "  header\tAuthorization: Bearer %s\n", m.GetBearerToken())
	fmt.Fprintf(w, "Claude Code\tclaude mcp add --transport http toolscope %s --header \"Authorization: Bearer %s\"\n", m.GetUrl(), m.GetBearerToken())
	fmt.Fprintf(w, "MCP Inspector\tnpx @modelcontextprotocol/inspector --transport http --server-url %s --header \"Authorization: Bearer %s\"\n",
		m.GetUrl(), m.GetBearerToken())
	if len(m.GetStdioCommand()) > 0 {
		fmt.Fprintf(w, "stdio clients\t%s\n", strings.Join(m.GetStdioCommand(), " "))
	}
}

// watchOnce prints events from one WatchTaskEvents stream, advancing
// *after, until the stream ends. printed reports whether any event came.
func (a *app) watchOnce(ctx context.Context, c pb.EventServiceClient, taskID string, after *uint64, kinds map[pb.TaskEventKind]bool) (printed bool, err error) {
	stream, err := c.WatchTaskEvents(ctx, &pb.WatchTaskEventsRequest{TaskId: taskID, AfterSequence: *after})
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return printed, nil
		} else if err != nil {
			return printed, err
		}
		e := resp.GetEvent()
		if len(kinds) > 0 && !kinds[e.GetKind()] {
			*after = e.GetSequence()
			continue
		}
		if a.json {
			b, err := marshalJSON(e, "")
			if err != nil {
				return printed, err
			}
			fmt.Fprintf(a.stdout, "%s\n", b)
		} else {
			fmt.Fprintln(a.stdout, formatEvent(e))
		}
		*after, printed = e.GetSequence(), true
	}
}

func (a *app) eventsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "Follow task events"}
	var (
		after     uint64
		kindNames []string
	)
	watch := &cobra.Command{
		Use:   "watch TASK [--after SEQUENCE] [--kind KIND]...",
		Short: "Print a task's events, then follow new ones until interrupted (JSON lines with --json)",
		Args:  ExactArgs("TASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			kinds, err := eventKindFilter(kindNames)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			conn, err := a.dial(ctx, cmd)
			if err != nil {
				return err
			}
			events := pb.NewEventServiceClient(conn)
			// A watcher that falls behind is cut off by the server; it
			// resumes after the last event it printed, a few times in a row
			// at most.
			for retries := 0; ; retries++ {
				printed, err := a.watchOnce(ctx, events, args[0], &after, kinds)
				switch {
				case err == nil || ctx.Err() != nil:
					return nil
				case !errors.Is(err, errdefs.ErrUnavailable) || retries >= 3 && !printed:
					return err
				}
				if printed {
					retries = 0
				}
				fmt.Fprintf(a.stderr, "toolscope: %v; resuming after event %d\n", err, after)
			}
		},
	}
	watch.Flags().Uint64Var(&after, "after", 0, "start after this sequence number")
	watch.Flags().StringArrayVar(&kindNames, "kind", nil, "print only events of this kind, e.g. tool.called (repeatable)")
	mapFields(watch, "after_sequence", "--after", "kind", "--kind")
	cmd.AddCommand(watch)
	return cmd
}

// eventKindFilter turns --kind values into the kinds they name. A kind is
// named as the orchestrator records it ("tool.called",
// "providers.push_failed") or as the API's enum value without its prefix,
// in any case ("TOOL_CALLED"); the names come from the API's enum, so a new
// kind is filterable as soon as it exists.
func eventKindFilter(names []string) (map[pb.TaskEventKind]bool, error) {
	if len(names) == 0 {
		return nil, nil
	}
	const prefix = "TASK_EVENT_KIND_"
	out := map[pb.TaskEventKind]bool{}
	for i, name := range names {
		key := prefix + strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(name), ".", "_"))
		v, ok := pb.TaskEventKind_value[key]
		if !ok || v == int32(pb.TaskEventKind_TASK_EVENT_KIND_UNSPECIFIED) {
			var known []string
			for k, n := range pb.TaskEventKind_value {
				if n != int32(pb.TaskEventKind_TASK_EVENT_KIND_UNSPECIFIED) {
					known = append(known, strings.ToLower(strings.TrimPrefix(k, prefix)))
				}
			}
			slices.Sort(known)
			return nil, errdefs.InvalidField(fmt.Sprintf("kind[%d]", i), "%q is not an event kind; kinds: %s", name, strings.Join(known, ", "))
		}
		out[pb.TaskEventKind(v)] = true
	}
	return out, nil
}
