package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/worker"
)

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func at(msec int) time.Time { return t0.Add(time.Duration(msec) * time.Millisecond) }

func TestBetween(t *testing.T) {
	t.Parallel()
	sent := map[string]time.Time{"a": at(0), "b": at(10), "c": at(20), "never": at(5)}
	started := map[string]time.Time{
		"a":     at(30), // 30 ms
		"b":     at(15), // 5 ms
		"c":     at(32), // 12 ms
		"other": at(1),  // not submitted by this producer set: not counted
	}
	lat, missing := between(sent, started)
	require.Equal(t, []time.Duration{5 * time.Millisecond, 12 * time.Millisecond, 30 * time.Millisecond}, lat,
		"each run from its own send to its own start, sorted")
	require.Equal(t, 1, missing)
	require.Equal(t, 12.0, percentile(lat, 50))

	lat, missing = between(map[string]time.Time{}, started)
	require.Empty(t, lat)
	require.Zero(t, missing)
}

func TestLateness(t *testing.T) {
	t.Parallel()
	instant := at(1000)
	late := lateness(instant, map[string]time.Time{"a": at(1250), "b": at(1003), "c": at(1100)})
	require.Equal(t, []time.Duration{3 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond}, late)
	require.Equal(t, 250.0, percentile(late, 100))
	require.Empty(t, lateness(instant, nil))
}

func TestStartSpan(t *testing.T) {
	t.Parallel()
	first, last := startSpan(map[string]time.Time{"a": at(40), "b": at(7), "c": at(90), "d": at(8)})
	require.Equal(t, at(7), first)
	require.Equal(t, at(90), last)
	first, last = startSpan(nil)
	require.True(t, first.IsZero() && last.IsZero())
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	now := at(0)
	rec := newRecorder(func() time.Time { return now })
	reached := rec.reach(2)
	require.NoError(t, rec.handler(context.Background(), &worker.Task{RunID: "r1"}))
	select {
	case <-reached:
		t.Fatal("reached after one start of two")
	default:
	}
	now = at(50)
	require.NoError(t, rec.handler(context.Background(), &worker.Task{RunID: "r1"}), "a second attempt of r1")
	require.Equal(t, 1, rec.count(), "a run tried again counts once")
	now = at(70)
	require.NoError(t, rec.handler(context.Background(), &worker.Task{RunID: "r2"}))
	select {
	case <-reached:
	default:
		t.Fatal("not reached after two starts")
	}
	require.Equal(t, map[string]time.Time{"r1": at(0), "r2": at(70)}, rec.snapshot(), "r1 keeps its first start")

	select {
	case <-rec.reach(2):
	default:
		t.Fatal("reach of a count already reached must be closed at once")
	}
	later := rec.reach(3)
	rec.note("r3", at(80))
	select {
	case <-later:
	default:
		t.Fatal("not reached after three starts")
	}
}

func TestCreatedRunID(t *testing.T) {
	t.Parallel()
	// The server's answer: the job, then the run with its id first.
	id, err := createdRunID([]byte(`{"job":{"id":"j1","depends_on":[{"ref":"x","run":"r0"}]},"run":{"id":"r1","status":"queued"}}`))
	require.NoError(t, err)
	require.Equal(t, "r1", id)

	// Not the key once (fields in another order): decoded.
	id, err = createdRunID([]byte(`{"run":{"status":"queued","id":"r2"},"job":{"id":"j2"}}`))
	require.NoError(t, err)
	require.Equal(t, "r2", id)
	// The key twice (a run inside the job): decoded, the top-level run wins.
	id, err = createdRunID([]byte(`{"job":{"id":"j3","last":{"run":{"id":"old"}}},"run":{"id":"r3"}}`))
	require.NoError(t, err)
	require.Equal(t, "r3", id)

	_, err = createdRunID([]byte(`{"job":{"id":"j4"},"run":null}`))
	require.ErrorContains(t, err, "names no run")
	_, err = createdRunID([]byte(`{"job":`))
	require.ErrorContains(t, err, "decode answer")
}

// BenchmarkRecorder is the bench's own cost per run of noting a handler's start, from many
// goroutines at once as a worker's attempts call it: part of what "bench process CPU" holds.
func BenchmarkRecorder(b *testing.B) {
	rec := newRecorder(time.Now)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("run%08d", i)
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = rec.handler(context.Background(), &worker.Task{RunID: ids[next.Add(1)-1]})
		}
	})
}

// BenchmarkCreatedRunID is the cost per steady submit of reading the run's id from the answer.
func BenchmarkCreatedRunID(b *testing.B) {
	answer := []byte(`{"job":{"id":"01JZ7Q0000000000000000000","name":"","namespace":"default","queue":"bench-steady-01JZ7Q0000","handler":"noop","priority":0,"max_attempts":1,"created_at":"2026-11-27T09:00:00Z","updated_at":"2026-11-27T09:00:00Z"},"run":{"id":"01JZ7Q0000000000000000001","job_id":"01JZ7Q0000000000000000000","status":"queued","queue":"bench-steady-01JZ7Q0000","scheduled_for":"2026-11-27T09:00:00Z","created_at":"2026-11-27T09:00:00Z","attempt":0,"max_attempts":1}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := createdRunID(answer); err != nil {
			b.Fatal(err)
		}
	}
}

func TestClocksAgree(t *testing.T) {
	t.Parallel()
	resumed := at(1000)
	require.NoError(t, clocksAgree(resumed, at(1200)))
	require.NoError(t, clocksAgree(resumed, at(990)), "within the slack: the stamps' rounding")
	require.ErrorContains(t, clocksAgree(resumed, at(900)), "clocks apart")
}
