// Package cli is the `toolscope` command line: `toolscope serve` runs the
// orchestrator, and the other subcommands are clients of its public gRPC
// API, one per RPC. Output is human-readable by default and the response
// message as JSON with --json. Errors go to stderr as "toolscope: ..." with
// an exit code per error class (see ExitCode).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/toolscope/toolscope/gen/toolscope/orchestrator/v1"
	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/version"
	"github.com/toolscope/toolscope/orchestrator/internal/model"
)

// app holds what every subcommand shares.
type app struct {
	server      string
	contextName string
	tokenFile   string
	tlsCA       string
	tlsCert     string
	tlsKey      string
	json        bool
	quiet       bool
	timeout     time.Duration
	stdout      io.Writer
	stderr      io.Writer

	conn *grpc.ClientConn
	// args is the whole command line, as the toolscope-server binary
	// gets it for serve and demo.
	args []string
}

// Local makes the commands of the toolscope-server binary: serve and demo,
// which run the orchestrator in this process (package servercmd).
type Local func() []*cobra.Command

// ServerBinary is the binary that has serve and demo: the toolscope binary
// hands those commands, with the whole command line, to the one installed
// next to it (else on PATH). It links the server and every executor, whose
// start-up the toolscope binary does not pay (ADR 0035).
const ServerBinary = "toolscope-server"

// The serve and demo commands' one-line help, in both binaries.
const (
	ServeShort = "Run the orchestrator (gRPC API, health and reflection) on embedded SQLite or PostgreSQL"
	DemoShort  = "Run the orchestrator and a guided scenario that shows what toolscope does (what 'make run' runs)"
)

// NewRoot returns the toolscope command tree for the command line args,
// writing to stdout and stderr; serve and demo are local's, or, when local
// is nil, run by the ServerBinary.
func NewRoot(stdout, stderr io.Writer, local Local, args []string) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr, args: args}
	root := &cobra.Command{
		Use:   "toolscope",
		Short: "Run AI coding agents on tasks with exactly the MCP tools each task can use",
		Long: `toolscope runs AI coding agents on tasks and gives each agent exactly the MCP
tools its task can use: GitHub PR tools when a GitHub repository is attached to
the task, GitLab MR tools when a GitLab one is, nothing provider-specific
otherwise.

Start the orchestrator with 'toolscope serve'; every other command talks to it.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPostRunE: func(*cobra.Command, []string) error {
			if a.conn != nil {
				return a.conn.Close()
			}
			return nil
		},
	}
	root.Version = version.String()
	root.SetVersionTemplate("toolscope {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&a.server, "server", "", "orchestrator address: unix:///path or host:port (env TOOLSCOPE_ADDR; default: the context's, else the local socket <data-dir>/toolscope.sock)")
	pf.StringVar(&a.contextName, "context", "", "context of the config file to use (env TOOLSCOPE_CONTEXT; see 'toolscope context')")
	pf.StringVar(&a.tokenFile, "token-file", "", "file holding the API token to send (env TOOLSCOPE_TOKEN holds the token itself)")
	pf.StringVar(&a.tlsCA, "tls-ca", "", "CA certificate that signed the server's TLS certificate (TCP)")
	pf.StringVar(&a.tlsCert, "tls-cert", "", "client certificate for TLS (TCP); its Subject carries the role")
	pf.StringVar(&a.tlsKey, "tls-key", "", "its private key")
	pf.BoolVar(&a.json, "json", false, "print results as JSON, for scripts")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "print no warnings")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "deadline for each API call")

	if local != nil {
		root.AddCommand(local()...)
	} else {
		root.AddCommand(a.byServerBinary("serve", ServeShort), a.byServerBinary("demo", DemoShort))
	}
	root.AddCommand(
		a.workspaceCmd(),
		a.repoCmd(),
		a.taskCmd(),
		a.sourceCmd(),
		a.sessionCmd(),
		a.eventsCmd(),
		a.mcpServerCmd(),
		a.deprecatedMCPServerCmd(),
		a.toolCmd(),
		a.certsCmd(),
		a.tokenCmd(),
		a.whoamiCmd(),
		a.contextCmd(),
		&cobra.Command{
			Use: "version", Short: "Print the build of toolscope", Args: ExactArgs(),
			RunE: func(*cobra.Command, []string) error {
				if a.json {
					return json.NewEncoder(a.stdout).Encode(map[string]string{"version": version.String()})
				}
				_, err := fmt.Fprintf(a.stdout, "toolscope %s\n", version.String())
				return err
			},
		},
	)
	conventions(root)
	return root
}

// call runs fn with a per-call deadline and a connection to the server.
func (a *app) call(cmd *cobra.Command, fn func(ctx context.Context, conn *grpc.ClientConn) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
	defer cancel()
	conn, err := a.dial(ctx, cmd)
	if err != nil {
		return err
	}
	return fn(ctx, conn)
}

func (a *app) workspaces(conn *grpc.ClientConn) pb.WorkspaceServiceClient {
	return pb.NewWorkspaceServiceClient(conn)
}

func (a *app) repositories(conn *grpc.ClientConn) pb.RepositoryServiceClient {
	return pb.NewRepositoryServiceClient(conn)
}

func (a *app) tasks(conn *grpc.ClientConn) pb.TaskServiceClient { return pb.NewTaskServiceClient(conn) }

func (a *app) sessions(conn *grpc.ClientConn) pb.SessionServiceClient {
	return pb.NewSessionServiceClient(conn)
}

// ExactArgs is cobra.ExactArgs with a message that names the arguments.
func ExactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			want := "no arguments"
			if len(names) > 0 {
				want = fmt.Sprintf("%d argument(s) (%s)", len(names), strings.Join(names, " "))
			}
			return Usagef("%s takes %s, got %d", commandName(cmd), want, len(args))
		}
		return nil
	}
}

// workspaceIDs lists every workspace the caller may list, in the
// server's order.
func (a *app) workspaceIDs(ctx context.Context, conn *grpc.ClientConn) ([]string, error) {
	list, err := a.listWorkspaces(ctx, conn)
	var ids []string
	for _, ws := range list {
		ids = append(ids, ws.GetId())
	}
	return ids, err
}

// pageAll asks for a listing page by page, each as large as the server
// makes it (page_size beyond its maximum asks for that), until a page
// names no next one; an orchestrator from before pages answers the
// whole listing in one response without one. It returns every page's
// items, in order.
func pageAll[T any](page func(size int32, token string) ([]T, string, error)) ([]T, error) {
	var all []T
	token := ""
	for {
		items, next, err := page(math.MaxInt32, token)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if next == token {
			return nil, fmt.Errorf("the server answered page %q with itself as the next page", token)
		}
		token = next
	}
}

// listWorkspaces is every workspace, every page of them.
func (a *app) listWorkspaces(ctx context.Context, conn *grpc.ClientConn) ([]*pb.Workspace, error) {
	return pageAll(func(size int32, token string) ([]*pb.Workspace, string, error) {
		resp, err := a.workspaces(conn).ListWorkspaces(ctx, &pb.ListWorkspacesRequest{PageSize: size, PageToken: token})
		return resp.GetWorkspaces(), resp.GetNextPageToken(), err
	})
}

// listAll is what list returns for parent, or when parent is "" for every
// parent: listings span all workspaces and tasks by default, as kubectl's
// --all-namespaces does on request. That is one call with the API's
// wildcard (model.Every), or, from an orchestrator that predates it
// (not_found for "-"), one call per id parents returns.
func listAll[T any](parent string, list func(parent string) ([]T, error), parents func() ([]string, error)) ([]T, error) {
	if parent != "" {
		return list(parent)
	}
	all, err := list(model.Every)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return all, err
	}
	ids, err := parents()
	if err != nil {
		return nil, err
	}
	all = nil
	for _, id := range ids {
		items, err := list(id)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
	}
	return all, nil
}

// listSessions is the sessions of task, or of every task when "".
func (a *app) listSessions(ctx context.Context, conn *grpc.ClientConn, task string) ([]*pb.Session, error) {
	return listAll(task, func(id string) ([]*pb.Session, error) {
		return pageAll(func(size int32, token string) ([]*pb.Session, string, error) {
			resp, err := a.sessions(conn).ListSessions(ctx, &pb.ListSessionsRequest{TaskId: id, PageSize: size, PageToken: token})
			return resp.GetSessions(), resp.GetNextPageToken(), err
		})
	}, func() ([]string, error) {
		tasks, err := a.listTasks(ctx, conn, "")
		var ids []string
		for _, t := range tasks {
			ids = append(ids, t.GetId())
		}
		return ids, err
	})
}

// listTasks is the tasks of workspace, or of every workspace when "".
func (a *app) listTasks(ctx context.Context, conn *grpc.ClientConn, workspace string) ([]*pb.Task, error) {
	return listAll(workspace, func(id string) ([]*pb.Task, error) {
		return pageAll(func(size int32, token string) ([]*pb.Task, string, error) {
			resp, err := a.tasks(conn).ListTasks(ctx, &pb.ListTasksRequest{WorkspaceId: id, PageSize: size, PageToken: token})
			return resp.GetTasks(), resp.GetNextPageToken(), err
		})
	}, func() ([]string, error) { return a.workspaceIDs(ctx, conn) })
}

// listRepositories is the repositories of workspace, or of every
// workspace when "".
func (a *app) listRepositories(ctx context.Context, conn *grpc.ClientConn, workspace string) ([]*pb.Repository, error) {
	return listAll(workspace, func(id string) ([]*pb.Repository, error) {
		return pageAll(func(size int32, token string) ([]*pb.Repository, string, error) {
			resp, err := a.repositories(conn).ListRepositories(ctx, &pb.ListRepositoriesRequest{WorkspaceId: id, PageSize: size, PageToken: token})
			return resp.GetRepositories(), resp.GetNextPageToken(), err
		})
	}, func() ([]string, error) { return a.workspaceIDs(ctx, conn) })
}
