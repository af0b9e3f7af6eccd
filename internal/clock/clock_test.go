package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFakeTimers(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	a := f.NewTimer(time.Second)
	b := f.NewTimer(time.Minute)
	stopped := f.NewTimer(2 * time.Second)
	require.True(t, stopped.Stop())
	require.False(t, stopped.Stop(), "second stop finds nothing pending")
	require.ElementsMatch(t, []time.Time{t0.Add(time.Second), t0.Add(time.Minute)}, f.Pending())

	f.Advance(999 * time.Millisecond)
	select {
	case <-a.C():
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Millisecond)
	require.Equal(t, t0.Add(time.Second), <-a.C())
	require.False(t, a.Stop(), "a fired timer cannot be stopped")
	require.Equal(t, []time.Time{t0.Add(time.Minute)}, f.Pending())

	f.Set(t0) // never backwards
	require.Equal(t, t0.Add(time.Second), f.Now())
	f.Set(t0.Add(time.Hour))
	require.Equal(t, t0.Add(time.Hour), (<-b.C()))
	select {
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	now := f.NewTimer(0)
	require.Equal(t, t0.Add(time.Hour), <-now.C(), "a zero timer fires at once")
}

func TestFakeTimerAt(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	past := f.NewTimerAt(start)
	select {
	case <-past.C():
	default:
		t.Fatal("a timer for a time the clock reads already fires at once")
	}
	// A timer for an absolute time is due then, however far the clock moved before it was
	// made: a timer for a duration would be due that long after the move.
	f.Set(start.Add(30 * time.Second))
	at := f.NewTimerAt(start.Add(time.Minute))
	rel := f.NewTimer(time.Minute)
	f.Set(start.Add(time.Minute))
	select {
	case <-at.C():
	default:
		t.Fatal("NewTimerAt did not fire at its time")
	}
	select {
	case <-rel.C():
		t.Fatal("NewTimer fired early")
	default:
	}
}
