package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/internal/cron"
)

// maxExplain bounds --count.
const maxExplain = 1000

// newCronCmd groups the commands about cron schedules. They work offline: no server, no job.
func newCronCmd(cfg *config) *cobra.Command {
	return group("cron", "Check cron schedules offline: when they fire, and how clock changes move them",
		newCronExplainCmd(cfg),
	)
}

func newCronExplainCmd(cfg *config) *cobra.Command {
	var (
		zone  string
		from  timeFlag
		count int
	)
	cmd := &cobra.Command{
		Use:   "explain EXPRESSION",
		Short: "Show when a cron expression fires next, in UTC and in its time zone",
		Long: "Explain shows the next fire instants of a cron expression, in UTC and in the expression's\n" +
			"time zone, and says of each fire that a daylight saving change moved why it moved: a wall-clock\n" +
			"time that does not exist fires at the first instant after the gap, and one that exists twice\n" +
			"fires at the first of the two. It creates nothing and needs no server. See docs/cron.md.",
		Example: "  stint cron explain '0 2 * * 1-5' --timezone Asia/Kolkata\n" +
			"  stint cron explain '30 2 * * *' --timezone Europe/Berlin --from 2030-03-30T00:00:00Z --count 3\n" +
			"  stint cron explain '@every 90m' --json",
		Args: func(_ *cobra.Command, got []string) error {
			switch {
			case len(got) == 0:
				return Usagef("missing EXPRESSION")
			case len(got) > 1:
				return Usagef("EXPRESSION: give it as one quoted argument, such as '0 2 * * 1-5' (got %d arguments)", len(got))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&zone, "timezone", "", "IANA time zone the expression is read in, such as Europe/Berlin (default UTC)")
	// --tz was this flag's first spelling; submit and job files say timezone.
	fl.StringVar(&zone, "tz", "", "")
	_ = fl.MarkDeprecated("tz", "use --timezone")
	fl.Var(&from, "from", "list the fires after this RFC 3339 time (default now)")
	fl.IntVar(&count, "count", 5, fmt.Sprintf("how many fires to list (1-%d)", maxExplain))
	out := addOutputFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, argv []string) error {
		if err := out.check(); err != nil {
			return err
		}
		if count < 1 || count > maxExplain {
			return Usagef("--count: must be from 1 to %d", maxExplain)
		}
		start := cfg.clock.Now()
		if from.t != nil {
			start = *from.t
		}
		sched, err := cron.Parse(argv[0], zone)
		if err != nil {
			var ce *cron.Error
			switch {
			case errors.As(err, &ce) && ce.Field == cron.FieldTimezone:
				return Usagef("--timezone: %s", ce.Message)
			case errors.As(err, &ce):
				return Usagef("EXPRESSION %q: %s", argv[0], ce.Message)
			}
			return fmt.Errorf("parse %q: %w", argv[0], err)
		}
		fires := sched.Explain(start, count)
		return out.print(cmd.OutOrStdout(), explainJSON(sched, start, fires), func(io.Writer) error {
			return printExplain(cmd, sched, start, count, fires)
		})
	}
	return cmd
}

func printExplain(cmd *cobra.Command, sched *cron.Schedule, start time.Time, count int, fires []cron.Fire) error {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "%s in %s, the next %d fires after %s:\n", sched, sched.Location(), count, start.UTC().Format(time.RFC3339))
	t := newTable(w, "UTC", "LOCAL", "DST")
	for _, f := range fires {
		t.row(f.At.Format(time.RFC3339), f.Local.Format(time.RFC3339), orDash(f.Note))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(fires) < count {
		fmt.Fprintf(w, "(no more fires)\n")
	}
	return nil
}

// cronExplain is what --json prints.
type cronExplain struct {
	Expression string     `json:"expression"` // normalized
	Timezone   string     `json:"timezone"`
	From       time.Time  `json:"from"`
	Fires      []cronFire `json:"fires"`
}

type cronFire struct {
	UTC   time.Time `json:"utc"`
	Local time.Time `json:"local"`
	// Wall is the wall-clock time the expression named; it differs from local when the clocks
	// jumped over it.
	Wall  string `json:"wall"`
	Moved bool   `json:"moved"`           // a clock change moved this fire
	Shift string `json:"shift,omitempty"` // gap or overlap
	Note  string `json:"note,omitempty"`
}

func explainJSON(sched *cron.Schedule, start time.Time, fires []cron.Fire) cronExplain {
	out := cronExplain{Expression: sched.String(), Timezone: sched.Location().String(), From: start.UTC(), Fires: []cronFire{}}
	for _, f := range fires {
		out.Fires = append(out.Fires, cronFire{
			UTC: f.At, Local: f.Local, Wall: f.Wall, Moved: f.Moved(), Shift: string(f.Shift), Note: f.Note,
		})
	}
	return out
}
