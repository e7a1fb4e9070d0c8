// Command toolscope-server is the whole toolscope command line linked with
// the orchestrator: `toolscope-server serve` runs it (with every executor),
// `toolscope-server demo` runs it with a guided scenario, and every other
// subcommand is toolscope's. `toolscope serve` and `toolscope demo` run this
// binary (ADR 0035).
package main

import (
	"context"
	"os"

	"github.com/toolscope/toolscope/orchestrator/internal/cli"
	"github.com/toolscope/toolscope/orchestrator/internal/cli/servercmd"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, servercmd.Commands))
}
