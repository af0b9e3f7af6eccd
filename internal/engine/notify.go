package engine

import (
	"context"

	"github.com/stint-dev/stint/internal/store"
)

// Notifier carries wake-ups between the servers sharing one store (PostgreSQL's
// LISTEN/NOTIFY in internal/store/postgres). Without one (Config.Notifier nil, as with
// SQLite, which one server owns) wake-ups stay inside this process.
type Notifier interface {
	// Publish tells the other servers about a change; it never blocks, and may coalesce
	// notifications of one topic.
	Publish(n store.Notification)
	// Run delivers the other servers' notifications (never this server's own) until ctx
	// ends, and sends what Publish queued. After losing its connection it delivers every
	// topic once, since notifications may have been missed.
	Run(ctx context.Context, deliver func(store.Notification))
}

// topic is a broadcast whose Notify also tells the other servers, through the engine's
// notifier; a notification from another server fires it locally only (notifyLocal), so
// that nothing echoes between servers.
type topic struct {
	*broadcast
	name     store.Topic
	notifier Notifier // nil: local only
}

func newTopic(name store.Topic, n Notifier) *topic {
	return &topic{broadcast: newBroadcast(), name: name, notifier: n}
}

// Notify wakes this server's waiters and tells the other servers.
func (t *topic) Notify() {
	t.broadcast.Notify()
	if t.notifier != nil {
		t.notifier.Publish(store.Notification{Topic: t.name})
	}
}

// notifyLocal wakes this server's waiters only.
func (t *topic) notifyLocal() { t.broadcast.Notify() }

// publishRuns tells the other servers to push runs to their workers' long polls (cancel or
// lost).
func (e *Engine) publishRuns(t store.Topic, runs []store.WorkerRun) {
	if e.cfg.Notifier != nil && len(runs) > 0 {
		e.cfg.Notifier.Publish(store.Notification{Topic: t, Runs: runs})
	}
}

// onNotify fires the local wake-ups of another server's change, publishing nothing.
func (e *Engine) onNotify(n store.Notification) {
	switch n.Topic {
	case store.TopicWork:
		e.work.notifyLocal()
	case store.TopicTimers:
		e.timers.notifyLocal()
	case store.TopicSchedules:
		e.schedChanged.notifyLocal()
	case store.TopicChanges:
		e.changes.notifyLocal()
	case store.TopicCancel, store.TopicLost:
		e.mu.Lock()
		for _, r := range n.Runs {
			w := e.workers[r.WorkerID]
			if w == nil {
				continue
			}
			if n.Topic == store.TopicCancel {
				w.cancel = append(w.cancel, r.RunID)
			} else {
				w.lost = append(w.lost, r.RunID)
			}
			w.events.Notify()
		}
		e.mu.Unlock()
	default:
		e.log.Warn("notification of an unknown topic", "topic", string(n.Topic))
	}
}
