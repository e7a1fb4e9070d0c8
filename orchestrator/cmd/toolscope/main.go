// Command toolscope is the toolscope orchestrator: `toolscope serve` runs
// the server, and every other subcommand is a client of its gRPC API. Run
// `toolscope --help` for the commands.
package main

import (
	"context"
	"os"

	"github.com/toolscope/toolscope/orchestrator/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
