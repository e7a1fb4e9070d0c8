package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/orchestrator/internal/paths"
)

// byServerBinary is serve or demo in the toolscope binary: it replaces this
// process with the ServerBinary given the same command line, flags and
// --help included (so it parses none itself), and the same environment: the
// same account's same command, only linked with the server. Its pid, its
// standard streams and its signals stay the caller's.
func (a *app) byServerBinary(use, short string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			path, ok := paths.Companion(ServerBinary)
			if !ok {
				self, _ := os.Executable()
				return fmt.Errorf("%w: 'toolscope %s' runs the orchestrator from the %s binary, and there is none next to %s or on PATH (make build puts both in bin/)",
					errdefs.ErrNotFound, use, ServerBinary, self)
			}
			err := syscall.Exec(path, append([]string{path}, a.args...), os.Environ())
			return fmt.Errorf("run %s: %w", path, err)
		},
	}
}
