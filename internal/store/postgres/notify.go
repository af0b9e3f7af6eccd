package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/store"
)

// DefaultNotifyWindow is NotifierConfig.Window's default: the first wake-up after a quiet
// spell goes out at once, and those that follow within the window share one NOTIFY.
const DefaultNotifyWindow = 5 * time.Millisecond

// Reconnection backoff of the listening connection.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
	// listenPing is how long the listening connection may stay silent before it is pinged,
	// so that a connection cut without a reset is found and replaced.
	listenPing = 30 * time.Second
	// maxPayload keeps a NOTIFY payload under PostgreSQL's 8000-byte limit.
	maxPayload = 7000
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Window is the shortest spacing of two NOTIFY statements of one server: what is
	// published meanwhile is coalesced (one notification per topic, the runs of cancel and
	// lost gathered). Default DefaultNotifyWindow.
	Window time.Duration
	// OnListen, if set, is called each time the listening connection has (re)connected,
	// run LISTEN and delivered every topic as fired. Tests wait on it.
	OnListen func()
}

// Notifier carries wake-ups between the servers sharing one PostgreSQL schema with
// LISTEN/NOTIFY: Publish queues a notification and a publishing loop sends what was queued
// with pg_notify, at most once per window, over the store's pool; a dedicated connection
// LISTENs and hands the other servers' notifications to Run's deliver function. A
// notifier ignores its own notifications (each carries its sender's random id). When the
// listening connection is lost it reconnects with backoff and then delivers every topic as
// fired, since notifications sent meanwhile were missed.
type Notifier struct {
	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig
	channel  string
	sender   string
	window   time.Duration
	log      *slog.Logger
	onListen func()

	mu      sync.Mutex
	pending map[store.Topic][]store.WorkerRun // topics published since the last send
	kick    chan struct{}
}

// NewNotifier returns a notifier over the store's database. Its channel is named after the
// store's schema (current_schema()), so stores in different schemas of one database do not
// wake each other.
func (s *Store) NewNotifier(ctx context.Context, cfg NotifierConfig) (*Notifier, error) {
	var schema string
	if err := s.pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("new notifier: read schema: %w", err)
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultNotifyWindow
	}
	return &Notifier{
		pool:     s.pool.Pool,
		connCfg:  s.pool.Config().ConnConfig.Copy(),
		channel:  "stint_" + schema,
		sender:   id.Token(),
		window:   cfg.Window,
		log:      s.log,
		onListen: cfg.OnListen,
		pending:  make(map[store.Topic][]store.WorkerRun),
		kick:     make(chan struct{}, 1),
	}, nil
}

// Publish queues n for the other servers; it never blocks. Notifications of one topic
// published within one window go out as one.
func (n *Notifier) Publish(note store.Notification) {
	n.mu.Lock()
	n.pending[note.Topic] = append(n.pending[note.Topic], note.Runs...)
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Run publishes what Publish queues and delivers the other servers' notifications to
// deliver (from one goroutine, in order) until ctx ends.
func (n *Notifier) Run(ctx context.Context, deliver func(store.Notification)) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.publishLoop(ctx)
	}()
	n.listenLoop(ctx, deliver)
	wg.Wait()
}

// payload is a notification on the wire.
type payload struct {
	Sender string      `json:"s"`
	Topic  store.Topic `json:"t"`
	Runs   [][2]string `json:"r,omitempty"` // (worker, run)
}

// take empties the queue into NOTIFY payloads: one per topic, more for a topic whose runs
// do not fit in one.
func (n *Notifier) take() ([]string, error) {
	n.mu.Lock()
	pending := n.pending
	n.pending = make(map[store.Topic][]store.WorkerRun, len(pending))
	n.mu.Unlock()
	var out []string
	for _, t := range store.Topics {
		runs, ok := pending[t]
		if !ok {
			continue
		}
		p := payload{Sender: n.sender, Topic: t}
		size := 0
		flush := func() error {
			b, err := json.Marshal(p)
			if err != nil {
				return fmt.Errorf("encode notification: %w", err)
			}
			out = append(out, string(b))
			p.Runs, size = nil, 0
			return nil
		}
		for _, r := range runs {
			if size > maxPayload {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			p.Runs = append(p.Runs, [2]string{r.WorkerID, r.RunID})
			size += len(r.WorkerID) + len(r.RunID) + 8
		}
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// publishLoop sends the queued notifications in one statement, then waits out the window
// (longer, backing off, after a failure, when what failed is queued again).
func (n *Notifier) publishLoop(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		payloads, err := n.take()
		if err == nil && len(payloads) > 0 {
			_, err = n.pool.Exec(ctx, "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", n.channel, payloads)
		}
		wait := n.window
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, listenMinBackoff), listenMaxBackoff)
			wait = backoff
			n.log.Warn("notifier: publish failed, trying again", "err", err, "in", wait)
			n.requeue(payloads)
		} else {
			backoff = 0
		}
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// requeue queues again the payloads a failed send did not deliver.
func (n *Notifier) requeue(payloads []string) {
	for _, s := range payloads {
		var p payload
		if json.Unmarshal([]byte(s), &p) != nil {
			continue
		}
		n.Publish(fromPayload(p))
	}
}

func fromPayload(p payload) store.Notification {
	note := store.Notification{Topic: p.Topic}
	for _, r := range p.Runs {
		note.Runs = append(note.Runs, store.WorkerRun{WorkerID: r[0], RunID: r[1]})
	}
	return note
}

// listenLoop keeps a listening connection until ctx ends, reconnecting with backoff.
func (n *Notifier) listenLoop(ctx context.Context, deliver func(store.Notification)) {
	backoff := listenMinBackoff
	for {
		listened, err := n.listen(ctx, deliver)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = listenMinBackoff
		}
		n.log.Warn("notifier: listening connection lost, reconnecting", "err", err, "in", backoff)
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listen connects, LISTENs, delivers every topic as fired and then each notification of
// another server, until the connection fails or ctx ends; listened reports whether it got
// as far as LISTEN.
func (n *Notifier) listen(ctx context.Context, deliver func(store.Notification)) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, n.connCfg.Copy())
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	// Whatever was sent while this server was not listening is lost: act as if it all came.
	for _, t := range store.Topics {
		deliver(store.Notification{Topic: t})
	}
	if n.onListen != nil {
		n.onListen()
	}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, listenPing)
		note, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = conn.Ping(pingCtx)
			cancel()
			if err != nil {
				return true, fmt.Errorf("ping: %w", err)
			}
			continue
		case err != nil:
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		var p payload
		if err := json.Unmarshal([]byte(note.Payload), &p); err != nil {
			n.log.Warn("notifier: unreadable notification", "payload", note.Payload, "err", err)
			continue
		}
		if p.Sender == n.sender {
			continue
		}
		deliver(fromPayload(p))
	}
}

// sleepCtx waits d or until ctx ends; it reports false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
