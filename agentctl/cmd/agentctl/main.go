// Command agentctl is the sidecar that stands next to an agent: it serves
// MCP to the agent and speaks the toolscope.agentctl.v1 gRPC contract to
// the orchestrator. It builds as a static binary (CGO_ENABLED=0) so the
// same file runs on the host, bind-mounted into any container image, or on
// a remote build host.
//
// This build provides `agentctl version`; the daemon (`agentctl serve`) and
// the stdio MCP server (`agentctl mcp`) are being built next.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	agentctlv1 "github.com/toolscope/toolscope/gen/toolscope/agentctl/v1"
	"github.com/toolscope/toolscope/internal/version"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "agentctl",
		Short:         "The toolscope sidecar: serves MCP to an agent, driven by the orchestrator",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the build and the orchestrator contract this agentctl speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(stdout, "agentctl %s\ncontract %s\n", version.String(), agentctlv1.AgentctlService_ServiceDesc.ServiceName)
			return err
		},
	})
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(stderr, "agentctl: %v\n", err)
		return 1
	}
	return 0
}
