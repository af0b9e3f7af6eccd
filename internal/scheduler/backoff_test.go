package scheduler

import (
	"testing"
	"time"

	"github.com/stint-dev/stint/internal/model"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	p := model.RetryPolicy{InitialDelay: time.Second, MaxDelay: 30 * time.Second, Multiplier: 2}
	tests := []struct {
		name string
		p    model.RetryPolicy
		n    int
		u    float64
		want time.Duration
	}{
		{"first retry waits the initial delay", p, 1, 0.5, time.Second},
		{"second doubles", p, 2, 0.5, 2 * time.Second},
		{"fifth", p, 5, 0.5, 16 * time.Second},
		{"capped at max", p, 6, 0.5, 30 * time.Second},
		{"huge attempt stays capped", p, 5000, 0.5, 30 * time.Second},
		{"zero policy uses defaults", model.RetryPolicy{}, 1, 0.5, DefaultInitialDelay},
		{"jitter low end", withJitter(p, 0.5), 2, 0, time.Second},
		{"jitter high end", withJitter(p, 0.5), 2, 1, 3 * time.Second},
		{"jitter never exceeds max", withJitter(p, 1), 10, 1, 30 * time.Second},
		{"jitter above one is clamped", withJitter(p, 7), 1, 0, 0},
		{"attempt zero treated as one", p, 0, 0.5, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Backoff(tt.p, tt.n, tt.u); got != tt.want {
				t.Fatalf("Backoff(n=%d, u=%v) = %v, want %v", tt.n, tt.u, got, tt.want)
			}
		})
	}
}

func withJitter(p model.RetryPolicy, j float64) model.RetryPolicy {
	p.Jitter = j
	return p
}
