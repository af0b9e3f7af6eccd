package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/stint-dev/stint/apitype"
)

// Causes of a handler's context being cancelled; read them with context.Cause.
var (
	// ErrCancelled: the run was cancelled (a push on the lease poll or the heartbeat).
	ErrCancelled = errors.New("run cancelled")
	// ErrTimedOut: the job's timeout expired.
	ErrTimedOut = errors.New("attempt timed out")
	// ErrLeaseLost: the server took the lease back, or the worker could not renew it within
	// the lease TTL. The attempt's result will not be reported.
	ErrLeaseLost = errors.New("lease lost")
	// ErrShutdown: the worker was draining and the attempt outlived the drain timeout.
	ErrShutdown = errors.New("worker shutting down")
)

// isUnknownWorker reports whether err from Lease or Heartbeat says the server does not know
// this worker, so that the agent should register again.
func isUnknownWorker(err error) bool {
	if errors.Is(err, ErrUnknownWorker) {
		return true
	}
	var p *apitype.Problem
	return errors.As(err, &p) && p.Status == 404
}

// isIDInUse reports whether err from Register says that another live session holds the
// worker's id (409): the registration succeeds once that session ends.
func isIDInUse(err error) bool {
	var p *apitype.Problem
	return errors.As(err, &p) && p.Status == 409
}

// isPermanent reports whether sending the same request again cannot succeed: a 4xx problem
// other than 408 (timeout) and 429 (too many requests).
func isPermanent(err error) bool {
	var p *apitype.Problem
	if !errors.As(err, &p) {
		return false
	}
	return p.Status >= 400 && p.Status < 500 && p.Status != 408 && p.Status != 429
}

// backoff is capped exponential backoff with jitter for retrying transient errors.
type backoff struct {
	n int
}

const (
	backoffMin = 50 * time.Millisecond
	backoffMax = 5 * time.Second
)

// next returns the next delay: backoffMin doubling up to backoffMax, each drawn uniformly from
// [d/2, d) so that many workers retrying after one outage spread out.
func (b *backoff) next() time.Duration {
	d := backoffMin << min(b.n, 16)
	if d > backoffMax || d <= 0 {
		d = backoffMax
	}
	b.n++
	return d/2 + rand.N(d/2)
}

func (b *backoff) reset() { b.n = 0 }

// sleep waits for d, or until ctx is done or stop is closed (stop may be nil). It reports
// whether the whole delay passed.
func sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}
