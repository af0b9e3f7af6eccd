package scheduler

import (
	"math"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// Default retry timings, used where a policy leaves them zero.
const (
	DefaultInitialDelay = time.Second
	DefaultMaxDelay     = 10 * time.Minute
	DefaultMultiplier   = 2.0
)

// Backoff returns the delay before attempt n+1 of a run whose attempt n just failed:
// InitialDelay * Multiplier^(n-1), capped at MaxDelay, then spread by ±Jitter using u, a
// uniform number in [0, 1) (0.5 means no spread). The result is never negative and never
// above MaxDelay.
func Backoff(p model.RetryPolicy, n int, u float64) time.Duration {
	initial, maxDelay, mult := p.InitialDelay, p.MaxDelay, p.Multiplier
	if initial <= 0 {
		initial = DefaultInitialDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	if mult < 1 {
		mult = DefaultMultiplier
	}
	if n < 1 {
		n = 1
	}
	d := float64(initial) * math.Pow(mult, float64(n-1))
	if d > float64(maxDelay) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(maxDelay)
	}
	if j := p.Jitter; j > 0 {
		if j > 1 {
			j = 1
		}
		d *= 1 + j*(2*u-1)
	}
	switch {
	case d < 0:
		return 0
	case d > float64(maxDelay):
		return maxDelay
	}
	return time.Duration(d)
}
