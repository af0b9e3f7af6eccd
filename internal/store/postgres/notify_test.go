package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/store"
)

// runNotifier starts a notifier of s until the test ends; it returns what it delivers and a
// channel that receives once per LISTEN.
func runNotifier(t *testing.T, s *Store) (*Notifier, <-chan store.Notification, <-chan struct{}) {
	t.Helper()
	listening := make(chan struct{}, 10)
	n, err := s.NewNotifier(context.Background(), NotifierConfig{OnListen: func() { listening <- struct{}{} }})
	require.NoError(t, err)
	got := make(chan store.Notification, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx, func(note store.Notification) { got <- note })
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return n, got, listening
}

// next returns the next notification delivered, failing after 10 s.
func next(t *testing.T, got <-chan store.Notification) store.Notification {
	t.Helper()
	select {
	case n := <-got:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
		return store.Notification{}
	}
}

// connected waits for a LISTEN and takes the topics a (re)connection delivers as fired.
func connected(t *testing.T, got <-chan store.Notification, listening <-chan struct{}) {
	t.Helper()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("notifier did not LISTEN within 10s")
	}
	for _, topic := range store.Topics {
		require.Equal(t, store.Notification{Topic: topic}, next(t, got), "a connection fires every topic")
	}
}

func TestNotifier(t *testing.T) {
	u := newSchema(t)
	a, b := openURL(t, u), openURL(t, u)
	pubA, gotA, listenA := runNotifier(t, a)
	pubB, gotB, listenB := runNotifier(t, b)
	connected(t, gotA, listenA)
	connected(t, gotB, listenB)

	t.Run("another server's topic arrives, its own does not", func(t *testing.T) {
		pubA.Publish(store.Notification{Topic: store.TopicWork})
		require.Equal(t, store.Notification{Topic: store.TopicWork}, next(t, gotB))
		// B publishing afterwards and A hearing only that shows A skipped its own.
		pubB.Publish(store.Notification{Topic: store.TopicSchedules})
		require.Equal(t, store.Notification{Topic: store.TopicSchedules}, next(t, gotA))
	})

	t.Run("runs of cancel arrive whole, however many", func(t *testing.T) {
		var runs []store.WorkerRun
		for i := range 1000 { // more than one payload holds
			runs = append(runs, store.WorkerRun{WorkerID: fmt.Sprintf("w-%d", i%7), RunID: fmt.Sprintf("run-%04d", i)})
		}
		pubA.Publish(store.Notification{Topic: store.TopicCancel, Runs: runs[:10]})
		pubA.Publish(store.Notification{Topic: store.TopicCancel, Runs: runs[10:]})
		var got []store.WorkerRun
		payloads := 0
		for len(got) < len(runs) {
			n := next(t, gotB)
			require.Equal(t, store.TopicCancel, n.Topic)
			got = append(got, n.Runs...)
			payloads++
		}
		require.Equal(t, runs, got)
		require.Greater(t, payloads, 1, "1000 runs do not fit one NOTIFY payload")
	})

	t.Run("after a lost connection every topic fires", func(t *testing.T) {
		var killed int
		err := a.pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE query = $1 AND pid <> pg_backend_pid()`, `LISTEN "`+pubB.channel+`"`).Scan(&killed)
		require.NoError(t, err)
		require.Equal(t, 2, killed, "both listening connections")
		connected(t, gotA, listenA)
		connected(t, gotB, listenB)
		pubA.Publish(store.Notification{Topic: store.TopicChanges})
		require.Equal(t, store.Notification{Topic: store.TopicChanges}, next(t, gotB), "B listens again")
	})
}

// TestNotifierCoalesces publishes one topic many times at once: fewer notifications arrive
// than were published, and at least one. A flush sends its topics in store.Topics' order,
// so the marker published last, of the last topic, comes after every one of them.
func TestNotifierCoalesces(t *testing.T) {
	u := newSchema(t)
	a, b := openURL(t, u), openURL(t, u)
	pubA, _, _ := runNotifier(t, a)
	_, gotB, listenB := runNotifier(t, b)
	connected(t, gotB, listenB)
	for range 1000 {
		pubA.Publish(store.Notification{Topic: store.TopicChanges})
	}
	pubA.Publish(store.Notification{Topic: store.TopicLost, Runs: []store.WorkerRun{{WorkerID: "w", RunID: "marker"}}})
	changes := 0
	for n := next(t, gotB); n.Topic != store.TopicLost; n = next(t, gotB) {
		require.Equal(t, store.TopicChanges, n.Topic)
		changes++
	}
	require.Less(t, changes, 1000, "published within a few windows: coalesced")
	require.GreaterOrEqual(t, changes, 1)
}
