// Command toolscope is the toolscope command line: every subcommand is a
// client of the orchestrator's gRPC API, except serve and demo, which run
// the orchestrator and are handed to the toolscope-server binary installed
// next to it (ADR 0035): this binary links none of the server, so a command
// starts as fast as a small Go program does. Run `toolscope --help`.
package main

import (
	"context"
	"os"

	"github.com/toolscope/toolscope/orchestrator/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, nil))
}
