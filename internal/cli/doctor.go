package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/stint-dev/stint/apitype"
)

// doctorZone is the zone whose data the doctor looks for on this machine, as the server does
// on its own (the CLI shows cron times in zones).
const doctorZone = "America/New_York"

// maxSkew is how far this machine's clock and the server's may differ, beyond the
// uncertainty of the round trip, before the doctor warns.
const maxSkew = 2 * time.Second

func newDoctorCmd(cfg *config) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check a stint setup (server, store, migrations, clocks, time zones, workers) and say what to fix",
		Long: `Check a stint setup and say what to fix. The server named by --server checks its store
(reachable, takes a write), its schema, its time zone data, the clocks of the other servers
and the workers it has seen (GET /v1/doctor); this machine checks that it reaches the server,
that their clocks agree and that it has time zone data. Each check says ok, warn or fail;
the exit code is 1 when one fails.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cfg.client(cmd)
			if err != nil {
				return err
			}
			var checks []apitype.DoctorCheck
			add := func(name, status, msg, fix string) {
				checks = append(checks, apitype.DoctorCheck{Name: name, Status: status, Message: msg, Fix: fix})
			}
			sent := cfg.clock.Now()
			d, err := c.Doctor(cmd.Context())
			got := cfg.clock.Now()
			if err != nil {
				add("server", apitype.CheckFail, fmt.Sprintf("%s: %v", cfg.server, err),
					"start a server (stint server, or stint dev), or name it with --server (env STINT_SERVER); with authentication on, give --token (env STINT_TOKEN)")
			} else {
				add("server", apitype.CheckOK, fmt.Sprintf("%s answered at %s", d.Server, cfg.server), "")
				rtt := got.Sub(sent)
				skew := d.Time.Sub(sent.Add(rtt / 2))
				if skew.Abs() > maxSkew+rtt/2 {
					add("clock", apitype.CheckWarn, fmt.Sprintf("the server's clock is %s off this machine's", skew.Round(time.Millisecond)),
						"synchronise the clocks (NTP, chrony)")
				} else {
					add("clock", apitype.CheckOK, fmt.Sprintf("the server's clock is within %s of this machine's", (maxSkew+rtt/2).Round(time.Millisecond)), "")
				}
				checks = append(checks, d.Checks...)
			}
			if _, err := time.LoadLocation(doctorZone); err != nil {
				add("timezone", apitype.CheckWarn, fmt.Sprintf("no time zone data on this machine: %v", err),
					"install the tzdata package of this system")
			} else {
				add("timezone", apitype.CheckOK, "time zone data present on this machine", "")
			}
			failed, err := printChecks(cmd.OutOrStdout(), checks)
			if err != nil {
				return err
			}
			if failed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
}

// printChecks prints one line per check, and what to fix under one that is not ok; failed
// says one failed.
func printChecks(w io.Writer, checks []apitype.DoctorCheck) (failed bool, err error) {
	for _, c := range checks {
		if _, err := fmt.Fprintf(w, "%-4s  %-10s  %s\n", c.Status, c.Name, c.Message); err != nil {
			return false, err
		}
		if c.Fix != "" && c.Status != apitype.CheckOK {
			if _, err := fmt.Fprintf(w, "      %-10s  fix: %s\n", "", c.Fix); err != nil {
				return false, err
			}
		}
		failed = failed || c.Status == apitype.CheckFail
	}
	return failed, nil
}
