package scheduler

import (
	"fmt"
	"strings"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
)

// QueueHold says why q holds back its queued runs as a whole: paused, at its max
// concurrency, or under a rate limit; PendingNone when it does not.
func QueueHold(q *model.Queue) (model.PendingCode, string) {
	switch {
	case q.Paused:
		return model.PendingQueuePaused, fmt.Sprintf("queue %q is paused", q.Name)
	case q.MaxConcurrency > 0 && q.Depth[model.RunRunning] >= q.MaxConcurrency:
		return model.PendingConcurrencyLimit, fmt.Sprintf("queue %q is at its max concurrency (%d running)", q.Name, q.MaxConcurrency)
	case q.RateLimit != nil:
		return model.PendingRateLimited, fmt.Sprintf("queue %q starts at most %d runs per %s: waiting for a turn (or a free worker)",
			q.Name, q.RateLimit.Rate, q.RateLimit.Per)
	}
	return model.PendingNone, ""
}

// WaitForWorker says why a due run that its queue does not hold back is still queued, given
// the active workers: none connected; none that meets its requirements (with the counts
// per constraint from placement.Explain); or some that fit, all busy. Each case is
// no_worker_fits: no worker can take the run now (as for an unconstrained run when every
// worker is busy); the words say whether waiting will help.
func WaitForWorker(rooms []placement.Room, req model.Requirements) (model.PendingCode, string) {
	switch {
	case len(rooms) == 0:
		return model.PendingNoWorker, "no worker is connected"
	case !placement.Constrained(req) && len(rooms) == 1:
		return model.PendingNoWorker, "waiting for a free slot: the one active worker is busy"
	case !placement.Constrained(req):
		return model.PendingNoWorker, fmt.Sprintf("waiting for a free slot: %d active workers are busy", len(rooms))
	}
	v := placement.Explain(rooms, req)
	if len(v.Fits) == 0 {
		return v.Code, v.Reason
	}
	if len(v.Fits) == 1 {
		return model.PendingNoWorker, fmt.Sprintf("waiting for a free slot: 1 worker fits (%s), busy", v.Fits[0])
	}
	return model.PendingNoWorker, fmt.Sprintf("waiting for a free slot: %d workers fit (%s), all busy", len(v.Fits), ListIDs(v.Fits, 5))
}

// ListIDs joins the first n ids with commas, saying how many more there are.
func ListIDs(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}
