package benchsum

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// Command returns `stint bench summarize FILE`, hidden: the summary of bench/scale.sh.
func Command() *cobra.Command {
	var figures []string
	cmd := &cobra.Command{
		Use:    "summarize FILE",
		Short:  "Summarise JSON lines of stint bench --json: median [min..max] per configuration and figure",
		Hidden: true,
		Long: `Read results of "stint bench --json", one a line, group the runs of each configuration
(same workload, store and parameters) and print, per workload, a Markdown table: a column
per configuration, a row per figure, each cell the median of the runs [min..max].`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("summarize: %w", err)
			}
			defer f.Close()
			groups, err := Read(f)
			if err != nil {
				return fmt.Errorf("summarize %s: %w", args[0], err)
			}
			return Write(cmd.OutOrStdout(), groups, figures)
		},
	}
	cmd.Flags().StringSliceVar(&figures, "figure", nil,
		"print only the figures whose name contains one of these (case-insensitive; repeat or separate by commas)")
	return cmd
}
