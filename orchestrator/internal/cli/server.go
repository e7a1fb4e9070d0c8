package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/toolscope/toolscope/internal/errdefs"
	"github.com/toolscope/toolscope/internal/version"
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
			env := append(os.Environ(), EnvCallerBuild+"="+version.String())
			err := syscall.Exec(path, append([]string{path}, a.args...), env)
			return fmt.Errorf("run %s: %w", path, err)
		},
	}
}

// EnvCallerBuild carries the toolscope binary's build to the
// ServerBinary it runs, which refuses to serve for another build
// (CheckCallerBuild): the two are one installation, and a server left
// behind by an upgrade of the command line would run silently otherwise.
const EnvCallerBuild = "TOOLSCOPE_CALLER_BUILD"

// CheckCallerBuild, in the ServerBinary, refuses to go on when the
// toolscope binary that ran it is another build (both builds known: a
// test or unstamped binary says nothing), naming both and where this one
// is. It removes EnvCallerBuild from the environment either way.
func CheckCallerBuild() error {
	caller, ok := os.LookupEnv(EnvCallerBuild)
	if !ok {
		return nil
	}
	_ = os.Unsetenv(EnvCallerBuild)
	self, _ := os.Executable()
	return checkBuilds(caller, version.String(), self)
}

// checkBuilds is CheckCallerBuild's rule: the caller's build and this
// one's (at path) must be the same, when both are known.
func checkBuilds(caller, own, path string) error {
	if caller == own || !version.Stamped(caller) || !version.Stamped(own) {
		return nil
	}
	return errdefs.FailedPrecondition("toolscope %s ran %s %s (%s): install both binaries from one build (make build puts both in bin/), "+
		"or run %s directly to use this one", caller, ServerBinary, own, path, ServerBinary)
}
