package servercmd

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/demo"
)

func demoCmd() *cobra.Command {
	opts := demo.Options{}
	var verbose, noContext bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: cli.DemoShort,
		Long: `Run the orchestrator on embedded SQLite and play a short scenario against
local stand-ins of the GitHub and GitLab APIs: a task on a GitHub repository, an
agent session listing its MCP tools, a GitLab repository attached in one batch,
one tools/list_changed and the new list, one GitHub and one GitLab tool call. A
hosted session on the same task (the orchestrator serves its tools itself, for
an agent that cannot run agentctl) gets the same change.
The orchestrator keeps running afterwards for you to explore. On Ctrl-C or
SIGTERM the demo stops its session (its agentctl), then the orchestrator, and
removes its data directory if it made it (no --data-dir).

While it runs, the CLI config file (see 'toolscope context') holds a context
named "demo" pointing at its socket, made current, so that plain toolscope
commands reach it with no setup; when the demo stops it removes that context and
makes the previous one current again (unless you switched meanwhile). With
--no-context the config file is left alone and the demo prints the
TOOLSCOPE_ADDR to export instead.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A taken port fails here, before the introduction is printed;
			// the server binds the address itself when it starts.
			if opts.Listen != "" {
				l, err := net.Listen("tcp", opts.Listen)
				if err != nil {
					return fmt.Errorf("listen on %s (set --listen to another address): %w", opts.Listen, err)
				}
				_ = l.Close()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Out, opts.JSON = cmd.OutOrStdout(), jsonOut(cmd)
			if verbose {
				opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			}
			if !noContext {
				opts.SetContext = cli.SetDemoContext
			}
			return demo.Run(ctx, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", "", "also serve TCP on this loopback address (callers there need an API token)")
	cmd.Flags().StringVar(&opts.Console, "console", "127.0.0.1:0", "serve the web console on this loopback address (port 0 picks a free port; empty: no console)")
	cmd.Flags().StringVar(&opts.Hosted, "hosted", "127.0.0.1:0", "serve hosted sessions on this loopback address and attach one (port 0 picks a free port; empty: none)")
	cmd.Flags().StringVar(&opts.DataDir, "data-dir", "", "data directory, which holds the socket (default: a new temporary one, removed when the demo stops)")
	cmd.Flags().StringVar(&opts.Agentctl, "agentctl", "", "agentctl binary (default: next to toolscope, then PATH)")
	cmd.Flags().BoolVar(&noContext, "no-context", false, "leave the CLI config file alone (no \"demo\" context); print the TOOLSCOPE_ADDR to export instead")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "also print the orchestrator's logs (stderr)")
	return cmd
}
