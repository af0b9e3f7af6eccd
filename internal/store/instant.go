package store

import (
	"fmt"

	"github.com/stint-dev/stint/internal/model"
)

// CheckInstants refuses a cron run that holds no Instant. The store keeps one cron run per
// (job, instant) (invariant 4) on the instant alone, and a run without one would escape
// that rule; scheduler.NewCronRun builds every cron run with its instant. The engines call
// it before they write anything, so such a run fails the whole call.
func CheckInstants(runs ...*model.Run) error {
	for _, r := range runs {
		if r != nil && r.Trigger == model.TriggerCron && r.Instant == nil {
			return fmt.Errorf("cron run %s holds no instant", r.ID)
		}
	}
	return nil
}
