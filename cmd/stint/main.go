// Command stint is a distributed job scheduler in one binary: `stint dev` for a first try,
// `stint server` and `stint worker` for a fleet, and a CLI for every API action.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/internal/app"
	"github.com/stint-dev/stint/internal/bench"
	"github.com/stint-dev/stint/internal/benchsum"
	"github.com/stint-dev/stint/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Execute(ctx, newRoot()))
}

// newRoot builds the whole command tree: the CLI's commands, the server's and the bench
// (with its summary of repeated runs, hidden).
func newRoot() *cobra.Command {
	b := bench.Command()
	b.AddCommand(benchsum.Command())
	return cli.NewRoot(append(app.Commands(), b)...)
}
