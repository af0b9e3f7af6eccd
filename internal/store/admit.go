package store

import (
	"time"

	"github.com/stint-dev/stint/internal/model"
)

// QueueRateKey is the rate_limits key of a queue's rate limit.
func QueueRateKey(queue string) string { return "queue:" + queue }

// RateColumns are the (rate, per in microseconds) columns of an optional rate limit.
func RateColumns(r *model.RateLimit) (int, int64) {
	if r == nil {
		return 0, 0
	}
	return r.Rate, r.Per.Microseconds()
}

// RateFromColumns is the rate limit that RateColumns wrote (nil: none).
func RateFromColumns(rate int, perMicros int64) *model.RateLimit {
	if rate <= 0 {
		return nil
	}
	return &model.RateLimit{Rate: rate, Per: time.Duration(perMicros) * time.Microsecond}
}
