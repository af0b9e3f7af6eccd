package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/clock"
)

func TestShortDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{59*time.Second + 900*time.Millisecond, "59s"},
		{time.Minute, "1m"},
		{59 * time.Minute, "59m"},
		{47 * time.Hour, "47h"},
		{48 * time.Hour, "2d"},
		{400 * 24 * time.Hour, "400d"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, shortDuration(tt.d), tt.d.String())
	}
}

func TestTimes(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	cfg := &config{clock: clock.NewFake(testNow), loc: paris}
	at := func(d time.Duration) *time.Time { v := testNow.Add(d); return &v }

	require.Equal(t, "2030-01-02 13:00:00 (just now)", cfg.when(at(0)), "local time")
	require.Equal(t, "-", cfg.when(nil))
	require.Equal(t, "-", cfg.when(&time.Time{}))
	require.Equal(t, "5m ago", cfg.ago(at(-5*time.Minute)))
	require.Equal(t, "in 2h", cfg.ago(at(2*time.Hour+time.Minute)))
	require.Equal(t, "just now", cfg.ago(at(500*time.Millisecond)))

	require.Equal(t, "-", cfg.elapsed(nil, nil))
	require.Equal(t, "1m0s", cfg.elapsed(at(-time.Minute), nil), "still running: until now")
	require.Equal(t, "123ms", cfg.elapsed(at(0), at(123456*time.Microsecond)))
	require.Equal(t, "2.3s", cfg.elapsed(at(0), at(2345*time.Millisecond)))
	require.Equal(t, "1h1m2s", cfg.elapsed(at(0), at(time.Hour+time.Minute+2400*time.Millisecond)))
	require.Equal(t, "0s", cfg.elapsed(at(0), at(-time.Second)), "clock skew")
}
