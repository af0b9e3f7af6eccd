package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSessionHeld(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ttl := 15 * time.Second
	liveSince := now.Add(-ttl)
	tests := []struct {
		name             string
		lastHeartbeat    time.Time
		resume, takeover bool
		held             bool
	}{
		{"a session that heartbeated just now holds the id", now, false, false, true},
		{"a heartbeat exactly the TTL ago still holds it", liveSince, false, false, true},
		{"silent for longer than the TTL: the id is free", liveSince.Add(-time.Nanosecond), false, false, false},
		{"naming the live session re-attaches", now, true, false, false},
		{"a proven caller takes over a live session", now, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.held, SessionHeld(tt.lastHeartbeat, liveSince, tt.resume, tt.takeover))
		})
	}
	require.Contains(t, SessionHeldReason("w1", now), `worker id "w1" is in use by a live session`)
}
