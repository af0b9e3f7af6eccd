package cli

import (
	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/internal/progress"
)

// progressBar returns a progress bar for total units of a long operation, drawn on cmd's
// error output, or nil (a nil bar draws nothing) when no person would read it: the error
// output is no terminal (see config.terminal: piped, redirected, TERM=dumb), the command
// prints for programs (o asks for JSON or YAML; o may be nil), or the work is a single unit.
// Standard output may go anywhere: the bar never is in it.
func (cfg *config) progressBar(cmd *cobra.Command, o *output, label string, total int) *progress.Bar {
	w := cmd.ErrOrStderr()
	if total < 2 || (o != nil && o.structured()) || cfg.terminal == nil || !cfg.terminal(w) {
		return nil
	}
	bar := progress.New(w, label, total, progress.WithClock(cfg.clock))
	bar.Set(0) // drawn at once: the first unit may take a while
	return bar
}
