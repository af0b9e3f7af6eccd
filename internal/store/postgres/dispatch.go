package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/placement"
	"github.com/stint-dev/stint/internal/scheduler"
	"github.com/stint-dev/stint/internal/store"
)

// promoteSQL queues at most $2 scheduled runs due at $1, earliest first. Like leaseSQL, it
// joins the locked runs back by primary key through a test on their status that makes
// them look few to the planner.
const promoteSQL = `WITH due AS MATERIALIZED (
		SELECT id, status FROM runs
		WHERE status = 'scheduled' AND scheduled_for <= $1
		ORDER BY scheduled_for
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	)
	UPDATE runs r SET status = 'queued', pending_code = '', pending_reason = ''
	FROM due WHERE r.id = due.id AND due.status = 'scheduled'`

// The earliest instants the timers sleep until.
const (
	nextDueSQL = `SELECT min(scheduled_for) FROM runs WHERE status = 'scheduled' AND scheduled_for > $1`
	// nextExpirySQL probes runs_running once per queue for its earliest expiry.
	nextExpirySQL = `SELECT min((SELECT r.lease_expires_at FROM runs r
		WHERE r.status = 'running' AND r.queue = q.name ORDER BY r.lease_expires_at LIMIT 1)) FROM queues q`
)

// PromoteDue moves due scheduled runs to queued, earliest first, at most Limit (all when
// Limit <= 0). Runs another server is promoting are skipped, not waited for.
func (s *Store) PromoteDue(ctx context.Context, p *store.PromoteDueParams) (int, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	tag, err := s.pool.Exec(ctx, promoteSQL, utc(p.Now), limit)
	if err != nil {
		return 0, translate(err, "promote due runs")
	}
	return int(tag.RowsAffected()), nil
}

// NextDue returns the earliest ScheduledFor after after among scheduled runs.
func (s *Store) NextDue(ctx context.Context, after time.Time) (time.Time, bool, error) {
	return s.minTime(ctx, nextDueSQL, "next due", utc(after))
}

// NextLeaseExpiry returns the earliest LeaseExpiresAt among running runs.
func (s *Store) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	return s.minTime(ctx, nextExpirySQL, "next lease expiry")
}

func (s *Store) minTime(ctx context.Context, sql, what string, args ...any) (time.Time, bool, error) {
	var t *time.Time
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&t); err != nil {
		return time.Time{}, false, translate(err, "%s", what)
	}
	if t == nil {
		return time.Time{}, false, nil
	}
	return t.UTC(), true, nil
}

// leaseQueuesSQL lists the queues a lease takes from, in order: not paused, with queued runs
// or scheduled runs due at $1 of the worker's kinds (%[1]s is handlerFilter's condition, from
// $2). The probe for queued work scans the queue's index backward, from its newest runs:
// leasing consumes it from the front, where the index entries of runs already leased wait
// for vacuum, and a forward probe would wade through them on every call. The probe for due
// runs scans backward from $1 for the same reason.
const leaseQueuesSQL = `SELECT q.name, q.max_concurrency, q.rate, q.rate_per_us FROM queues q
	WHERE NOT q.paused AND ((
		SELECT r.id FROM runs r WHERE r.status = 'queued' AND r.queue = q.name%[1]s
		ORDER BY r.priority, r.scheduled_for DESC, r.id DESC LIMIT 1) IS NOT NULL
		OR (SELECT r.id FROM runs r WHERE r.status = 'scheduled' AND r.queue = q.name AND r.scheduled_for <= $1%[1]s
		ORDER BY r.scheduled_for DESC LIMIT 1) IS NOT NULL)
	ORDER BY q.priority DESC, q.name`

// countRunningSQL counts the running runs of queue $1.
const countRunningSQL = `SELECT count(*) FROM runs WHERE status = 'running' AND queue = $1`

// leaseQueue is a queue that has queued runs a worker may take.
type leaseQueue struct {
	name           string
	maxConcurrency int
	rate           *model.RateLimit
}

// handlerFilter is the condition on runs (alias r) that restricts leasing to the worker's
// kinds: $N is the handler list, $N+1 whether it runs commands. A worker that names no
// handler and no commands takes everything.
func handlerFilter(p *store.LeaseRunsParams, n int) (string, []any) {
	if len(p.Handlers) == 0 && !p.Commands {
		return "", nil
	}
	return fmt.Sprintf(" AND (r.handler = ANY($%d::text[]) OR ($%d::boolean AND r.handler = ''))", n, n+1),
		[]any{p.Handlers, p.Commands}
}

// LeaseRuns hands up to Max queued runs to a worker: queue by queue in queue-priority order,
// each queue's runs with FOR UPDATE SKIP LOCKED, placed by requirements (see
// store.Store). The worker's row is locked while its free capacity is read and its runs
// leased, so that leases of one worker through several servers never overbook it. A queue
// with a MaxConcurrency has its row locked while its running runs are counted and its runs
// leased, so that servers leasing at once never exceed the limit.
func (s *Store) LeaseRuns(ctx context.Context, p *store.LeaseRunsParams) (*store.Leased, error) {
	if p.Max <= 0 {
		return &store.Leased{}, nil
	}
	filter, fargs := handlerFilter(p, 2)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(leaseQueuesSQL, filter), append([]any{utc(p.Now)}, fargs...)...)
	if err != nil {
		return nil, translate(err, "lease runs: list queues")
	}
	queues, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (leaseQueue, error) {
		var (
			q    leaseQueue
			rate int
			per  int64
		)
		err := row.Scan(&q.name, &q.maxConcurrency, &rate, &per)
		q.rate = store.RateFromColumns(rate, per)
		return q, err
	})
	if err != nil {
		return nil, translate(err, "lease runs: list queues")
	}
	if len(queues) == 0 {
		return &store.Leased{}, nil
	}
	if len(queues) == 1 && queues[0].maxConcurrency == 0 && queues[0].rate == nil && p.Now.UnixNano() >= s.placedUntil.Load() {
		// One statement is one transaction: no BEGIN and COMMIT round trips.
		leases, err := leaseUnplaced(ctx, s.pool, p, queues[0].name)
		if err != nil {
			return nil, fmt.Errorf("lease runs: %w", err)
		}
		if len(leases) > 0 {
			return &store.Leased{Leases: leases}, nil
		}
	}
	out := &store.Leased{}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		*out = store.Leased{}
		if _, err := tx.Exec(ctx, leasePlannerSQL); err != nil {
			return translate(err, "lease runs: planner settings")
		}
		placer, err := workerPlacer(ctx, tx, p)
		if err != nil {
			return err
		}
		for _, q := range queues {
			n := p.Max - len(out.Leases)
			if n <= 0 {
				break
			}
			if q.maxConcurrency > 0 {
				free, err := lockQueueSlots(ctx, tx, q.name)
				if err != nil {
					return err
				}
				if free <= 0 {
					continue
				}
				n = min(n, free)
			}
			var tat time.Time
			if q.rate != nil {
				key := store.QueueRateKey(q.name)
				if err := lockKey(ctx, tx, key); err != nil {
					return err
				}
				var err error
				if tat, err = rateTAT(ctx, tx, key); err != nil {
					return err
				}
				if n, _ = scheduler.TakeTurns(tat, utc(p.Now), q.rate, n); n <= 0 {
					continue
				}
			}
			leases, err := leaseFromQueue(ctx, tx, p, placer, q.name, n)
			if err != nil {
				return err
			}
			out.Leases = append(out.Leases, leases...)
			if q.rate != nil && len(leases) > 0 {
				_, next := scheduler.TakeTurns(tat, utc(p.Now), q.rate, len(leases))
				if err := setRateTAT(ctx, tx, store.QueueRateKey(q.name), next); err != nil {
					return err
				}
			}
		}
		out.HeldUntil = placer.HeldUntil
		if placer.SawConstrained {
			s.placedUntil.Store(p.Now.Add(placedPathFor).UnixNano())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease runs: %w", err)
	}
	if out.Leases == nil {
		out.Leases = []*model.Lease{}
	}
	return out, nil
}

// lockQueueSlots locks a queue's row and returns how many more runs it may have running
// (unlimited queues report a large number). The count is read after the lock is held, so it
// sees every lease committed by a server that held it before.
func lockQueueSlots(ctx context.Context, tx pgx.Tx, queue string) (int, error) {
	var limit int
	var paused bool
	if err := tx.QueryRow(ctx, `SELECT max_concurrency, paused FROM queues WHERE name = $1 FOR UPDATE`, queue).Scan(&limit, &paused); err != nil {
		return 0, translate(err, "lock queue %s", queue)
	}
	if paused {
		return 0, nil
	}
	if limit <= 0 {
		return int(^uint(0) >> 1), nil
	}
	var running int
	if err := tx.QueryRow(ctx, countRunningSQL, queue).Scan(&running); err != nil {
		return 0, translate(err, "count running in queue %s", queue)
	}
	return limit - running, nil
}

// leaseSet is the SET list that leases a run (alias r) to worker $%d, until $%d, at $%d:
// running, one more attempt, a new random lease token (gen_random_uuid draws from the
// server's strong random source), started now if it never was.
const leaseSet = `status = 'running', attempt = r.attempt + 1, worker_id = $%d,
		lease_token = gen_random_uuid()::text, lease_expires_at = $%d,
		started_at = coalesce(r.started_at, $%[3]d), attempt_started_at = $%[3]d,
		pending_code = '', pending_reason = ''`

// placedPathFor is how long LeaseRuns goes straight to the placing path after it met runs
// with requirements: while such runs are queued, the one-statement path would mostly find
// them and lease nothing.
const placedPathFor = time.Second

// leaseUnplacedSQL leases up to $2 runs of queue $1 in one statement when none of them has
// requirements (they book nothing, so there is nothing to place): if any of the runs it
// picks has some, it leases nothing and LeaseRuns takes the placing path. Unless the queue
// was paused since it was listed. The lease token is a random UUID.
//
// It takes the queue's queued runs and its scheduled runs due at $5 (earliest due first),
// in lease order: a due run needs no promotion's write before its lease (see
// service.Promoter). Each kind is locked by its own scan, at most $2 of each; the ones not
// leased are unlocked as the statement ends. The due scan walks runs_due, or, when the
// planner finds it cheaper (few scheduled runs), runs_scheduled filtered by queue: either
// way only runs due now, which the promoter queues within its grace.
//
// The plan must not depend on statistics (see TestPlans): the picked runs are joined back
// by primary key, one index probe each. The planner cannot know how many a LIMIT $2 takes
// and guesses a tenth of the queue, so a plain join hashed all runs when the backlog
// looked large; "id = ANY (ARRAY(...))" guesses ten, which a connection that first leased
// while the table was nearly empty planned as a sequential scan of runs, and kept as its
// generic plan until autovacuum analyzed the table. The test on picked.status (always
// true) has the planner's default selectivity for a column without statistics, so picked
// looks a few hundred times smaller than the LIMIT guess, small enough for probes to win
// whatever the table's size.
var leaseUnplacedSQL = `WITH queued AS MATERIALIZED (
		SELECT r.id, r.priority, r.scheduled_for,
			r.req_cpu > 0 OR r.req_memory_mb > 0 OR r.req_gpu > 0 OR r.req_labels IS NOT NULL AS placed
		FROM runs r
		WHERE r.status = 'queued' AND r.queue = $1%[1]s
			AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = $1 AND q.paused)
		ORDER BY r.priority DESC, r.scheduled_for, r.id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	), due AS MATERIALIZED (
		SELECT r.id, r.priority, r.scheduled_for,
			r.req_cpu > 0 OR r.req_memory_mb > 0 OR r.req_gpu > 0 OR r.req_labels IS NOT NULL AS placed
		FROM runs r
		WHERE r.status = 'scheduled' AND r.queue = $1 AND r.scheduled_for <= $5%[1]s
			AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = $1 AND q.paused)
		ORDER BY r.scheduled_for
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	), picked AS MATERIALIZED (
		SELECT c.id, 'queued'::text AS status, c.placed FROM (
			SELECT * FROM queued UNION ALL SELECT * FROM due
		) c
		ORDER BY c.priority DESC, c.scheduled_for, c.id
		LIMIT $2
	)
	UPDATE runs r SET ` + fmt.Sprintf(leaseSet, 3, 4, 5) + `
	FROM picked WHERE r.id = picked.id AND picked.status = 'queued'
		AND NOT EXISTS (SELECT 1 FROM picked p WHERE p.placed)
	RETURNING ` + runCols + `, ` + leaseSpec

// leaseSpec is the job's spec a lease carries: runSpec without its args, which the run
// has (a lease's args are its run's). Runs of one job, and one-off jobs alike but for their
// args, then carry the same spec, which scanLeases decodes once a batch.
const leaseSpec = `(` + runSpec + `) - 'args'`

// leasePlannerSQL is the first statement of every lease transaction: its statements take
// runs in an index's order (ORDER BY ... LIMIT ... FOR UPDATE SKIP LOCKED over runs_queued,
// runs_due, runs_scheduled), and no plan may sort instead. A connection plans a statement
// once (generic plans, see Open) and keeps the plan; on a table never analyzed, both the
// ordered index walk and a bitmap scan of the queue's queued runs followed by a sort are
// estimated at one row, and which costs less flips as the table and its indexes grow. A
// connection that planned the lease at the wrong moment read and sorted every queued run of
// the queue on every lease (400 ms a lease with 140,000 queued, on disk): drains of 200,000
// runs went at 6,000-8,000 runs/s or at 12,000, depending on the connection that leased.
// With sorts disabled the ordered index walk is the only plan left without one.
// TestLeasePlansNeverSort checks it.
const leasePlannerSQL = `SET LOCAL enable_sort = off`

// leaseUnplaced runs leaseUnplacedSQL for up to p.Max runs of queue, in a transaction of its
// own begun with leasePlannerSQL: the four statements go in one round trip.
func leaseUnplaced(ctx context.Context, pool classifiedPool, p *store.LeaseRunsParams, queue string) ([]*model.Lease, error) {
	exp := utc(p.Now.Add(p.LeaseTTL))
	filter, fargs := handlerFilter(p, 6)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(leasePlannerSQL)
	lease := b.Queue(fmt.Sprintf(leaseUnplacedSQL, filter), append([]any{queue, p.Max, p.WorkerID, exp, utc(p.Now)}, fargs...)...)
	b.Queue("COMMIT")
	var (
		leases  []*model.Lease
		scanErr error // already translated
	)
	lease.Query(func(rows pgx.Rows) error {
		leases, scanErr = scanLeases(rows, exp, queue)
		return scanErr
	})
	err := pool.SendBatch(ctx, b).Close()
	if scanErr != nil {
		return nil, scanErr
	}
	if err != nil {
		return nil, translate(err, "lease from queue %s", queue)
	}
	return leases, nil
}

// workerRoomSQL locks worker $1's row and reads its labels and declared capacity. What its
// running runs book is read after, by workerBookedSQL: under READ COMMITTED a statement's
// snapshot is taken before it waits for a lock, so a sum in the locking statement would
// miss the runs that the lock's previous holder (a concurrent lease) just committed.
const workerRoomSQL = `SELECT labels, cap_cpu, cap_memory_mb, cap_gpu FROM workers WHERE id = $1 FOR NO KEY UPDATE`

// workerBookedSQL sums what the running runs of worker $1 book (runs_placed).
const workerBookedSQL = `SELECT coalesce(sum(r.req_cpu), 0), coalesce(sum(r.req_memory_mb), 0)::int8,
		coalesce(sum(r.req_gpu), 0)::int8
	FROM runs r WHERE r.worker_id = $1 AND ` + placedTerm

// placedTerm is the WHERE of runs_placed (migration 0004) for runs aliased r: running runs
// that book capacity.
const placedTerm = `r.status = 'running' AND (r.req_cpu > 0 OR r.req_memory_mb > 0 OR r.req_gpu > 0)`

// liveRoomsSQL reads the live workers other than $2 (active, heard from since $1) with
// what their running runs book.
const liveRoomsSQL = `SELECT w.id, w.labels, w.cap_cpu, w.cap_memory_mb, w.cap_gpu,
		coalesce(b.cpu, 0), coalesce(b.mem, 0)::int8, coalesce(b.gpu, 0)::int8
	FROM workers w
	LEFT JOIN (SELECT r.worker_id, sum(r.req_cpu) AS cpu, sum(r.req_memory_mb) AS mem, sum(r.req_gpu) AS gpu
		FROM runs r WHERE r.worker_id IS NOT NULL AND ` + placedTerm + ` GROUP BY r.worker_id) b ON b.worker_id = w.id
	WHERE w.state = 'active' AND w.last_heartbeat >= $1 AND w.id <> $2`

// workerPlacer locks the asking worker's row and reads its room (no capacity and no labels
// when it is not registered).
func workerPlacer(ctx context.Context, tx pgx.Tx, p *store.LeaseRunsParams) (*store.Placer, error) {
	var (
		labels         []byte
		declared, used model.Capacity
		usedMem        int64
		usedGPU        int64
	)
	err := tx.QueryRow(ctx, workerRoomSQL, p.WorkerID).Scan(&labels, &declared.CPU, &declared.MemoryMB, &declared.GPU)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, translate(err, "room of worker %s", p.WorkerID)
	default:
		if err := tx.QueryRow(ctx, workerBookedSQL, p.WorkerID).Scan(&used.CPU, &usedMem, &usedGPU); err != nil {
			return nil, translate(err, "capacity booked on worker %s", p.WorkerID)
		}
	}
	used.MemoryMB, used.GPU = usedMem, int(usedGPU)
	lbls, err := decodeWorkerLabels(p.WorkerID, labels)
	if err != nil {
		return nil, err
	}
	return &store.Placer{
		Self: store.NewRoom(p.WorkerID, lbls, declared, used),
		Hold: p.BestFitHold,
		Now:  p.Now,
		LoadOthers: func() ([]placement.Room, error) {
			rows, err := tx.Query(ctx, liveRoomsSQL, utc(p.LiveSince), p.WorkerID)
			if err != nil {
				return nil, translate(err, "live workers")
			}
			defer rows.Close()
			var out []placement.Room
			for rows.Next() {
				var (
					id             string
					labels         []byte
					declared, used model.Capacity
					usedMem        int64
					usedGPU        int64
				)
				if err := rows.Scan(&id, &labels, &declared.CPU, &declared.MemoryMB, &declared.GPU, &used.CPU, &usedMem, &usedGPU); err != nil {
					return nil, translate(err, "live workers")
				}
				used.MemoryMB, used.GPU = usedMem, int(usedGPU)
				lbls, err := decodeWorkerLabels(id, labels)
				if err != nil {
					return nil, err
				}
				out = append(out, store.NewRoom(id, lbls, declared, used))
			}
			return out, translate(rows.Err(), "live workers")
		},
	}, nil
}

// candidatesSQL lists, in lease order, up to $6 queued runs of queue $1 that each fit the
// asking worker: no more cpu ($2), memory ($3) and gpu ($4) than it has free, and
// requirement labels its labels ($5) contain; unless the queue was paused since it was
// listed. %s is handlerFilter's condition from $7. The rows stay locked until the lease's
// transaction ends; other servers skip them.
const candidatesSQL = `SELECT r.id, r.req_cpu, r.req_memory_mb, r.req_gpu, r.req_labels, r.scheduled_for FROM runs r
	WHERE r.status = 'queued' AND r.queue = $1%s
		AND r.req_cpu <= $2 AND r.req_memory_mb <= $3 AND r.req_gpu <= $4
		AND (r.req_labels IS NULL OR r.req_labels <@ $5::jsonb)
		AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = $1 AND q.paused)
	ORDER BY r.priority DESC, r.scheduled_for, r.id
	LIMIT $6
	FOR UPDATE OF r SKIP LOCKED`

// claimSQL leases the runs $1 (picked from candidatesSQL, locked by this transaction) to
// worker $2. The lease token is a random UUID (gen_random_uuid draws from the server's
// strong random source).
//
// The plan must not depend on statistics (see TestPlans): the runs are found by primary
// key, one index probe each. unnest of a parameter is guessed at ten rows, which on a
// nearly empty, never analyzed table plans as a hash join over a sequential scan of runs,
// kept as the connection's generic plan. The test on picked.status (always true) has the
// planner's default selectivity for a column without statistics, so picked looks like a
// row or two and probes win whatever the table's size.
var claimSQL = `WITH picked AS MATERIALIZED (
		SELECT u.id, 'queued'::text AS status FROM unnest($1::text[]) AS u(id)
	)
	UPDATE runs r SET ` + fmt.Sprintf(leaseSet, 2, 3, 4) + `
	FROM picked WHERE r.id = picked.id AND picked.status = 'queued'
	RETURNING ` + runCols + `, ` + leaseSpec

// promoteQueueSQL queues at most $3 scheduled runs of queue $1 due at $2, earliest first,
// for the placing path to consider them with the queued ones (leaseUnplacedSQL takes them
// straight from scheduled). Runs another lease or the promoter holds are skipped.
const promoteQueueSQL = `WITH due AS MATERIALIZED (
		SELECT id, status FROM runs
		WHERE status = 'scheduled' AND queue = $1 AND scheduled_for <= $2
		ORDER BY scheduled_for
		LIMIT $3
		FOR UPDATE SKIP LOCKED
	)
	UPDATE runs r SET status = 'queued', pending_code = '', pending_reason = ''
	FROM due WHERE r.id = due.id AND due.status = 'scheduled'`

// leaseFromQueue leases up to n runs of queue that the placer takes, in lease order: its
// queued runs and its due scheduled ones, which it queues first.
func leaseFromQueue(ctx context.Context, tx pgx.Tx, p *store.LeaseRunsParams, placer *store.Placer, queue string, n int) ([]*model.Lease, error) {
	now := utc(p.Now)
	exp := utc(p.Now.Add(p.LeaseTTL))
	if _, err := tx.Exec(ctx, promoteQueueSQL, queue, now, n); err != nil {
		return nil, translate(err, "queue due runs of queue %s", queue)
	}
	filter, fargs := handlerFilter(p, 7)
	free := placer.Self.Free
	labels := labelsDoc(placer.Self.Labels)
	if labels == nil {
		labels = []byte(`{}`)
	}
	args := append([]any{queue, free.CPU + 1e-9, free.MemoryMB, free.GPU, string(labels), n}, fargs...)
	rows, err := tx.Query(ctx, fmt.Sprintf(candidatesSQL, filter), args...)
	if err != nil {
		return nil, translate(err, "lease from queue %s", queue)
	}
	var (
		ids   []string
		cands []placement.Candidate
	)
	for rows.Next() {
		var (
			id string
			c  placement.Candidate
		)
		if err := rows.Scan(&id, &c.Req.CPU, &c.Req.MemoryMB, &c.Req.GPU, &c.Req.Labels, &c.Since); err != nil {
			rows.Close()
			return nil, translate(err, "lease from queue %s", queue)
		}
		c.Since = c.Since.UTC()
		ids = append(ids, id)
		cands = append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, translate(err, "lease from queue %s", queue)
	}
	take, err := placer.Pick(cands)
	if err != nil || len(take) == 0 {
		return nil, err
	}
	picked := make([]string, len(take))
	for i, k := range take {
		picked[i] = ids[k]
	}
	rows, err = tx.Query(ctx, claimSQL, picked, p.WorkerID, exp, now)
	if err != nil {
		return nil, translate(err, "lease from queue %s", queue)
	}
	return scanLeases(rows, exp, queue)
}

// scanLeases reads the rows of a lease statement (runs, then their job's spec) as leases in
// lease order, and closes rows.
func scanLeases(rows pgx.Rows, exp time.Time, queue string) ([]*model.Lease, error) {
	defer rows.Close()
	var out []*model.Lease
	specs := map[string]*model.JobSpec{} // each distinct spec of the batch, decoded once
	for rows.Next() {
		var (
			r                        runRow
			status, pending, trigger string
			args, spec               []byte
		)
		if err := rows.Scan(append(runDest(&r, &status, &pending, &trigger, &args), &spec)...); err != nil {
			return nil, translate(err, "lease from queue %s", queue)
		}
		fixRun(&r, status, pending, trigger, args)
		l := &model.Lease{Run: &r.Run, Token: r.LeaseToken, ExpiresAt: exp}
		if js, ok := specs[string(spec)]; ok {
			l.Spec = *js
		} else {
			if err := decodeSpec(spec, &l.Spec); err != nil {
				return nil, fmt.Errorf("lease run %s: %w", r.ID, err)
			}
			specs[string(spec)] = &l.Spec
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "lease from queue %s", queue)
	}
	slices.SortFunc(out, func(a, b *model.Lease) int {
		if a.Run.Priority != b.Run.Priority {
			return b.Run.Priority - a.Run.Priority
		}
		if c := a.Run.ScheduledFor.Compare(b.Run.ScheduledFor); c != 0 {
			return c
		}
		return strings.Compare(a.Run.ID, b.Run.ID)
	})
	return out, nil
}

// heartbeatSQL records the heartbeats of workers $1 (each of session $2, when not empty)
// at $3 and extends to $8 the leases ($4 run, $5 token) that are still the listed worker's
// ($6) and whose beat's session ($7) is the worker's; it returns a row per worker it found
// (true, id, session, draining) and one per extended lease (false, run id, worker id,
// cancel requested). A beat of another session changes nothing. The input is sorted (beats
// by worker id, leases by run id) and each worker and run is locked through a lateral
// primary-key lookup, so both are locked in id order, as every batch does. A listed lease
// that has already ended (its run no longer running with that token, as are the leases a
// worker holds until their completions are acknowledged) is seen so by a first lookup
// without a lock, and not locked: a worker that listed a thousand leases just ended used
// to lock a thousand runs, a lock's WAL record each, for 30 ms, making their completions
// wait. A run the first lookup saw running is locked and tested again. Beats of one worker
// may repeat.
//
// The plan must not depend on statistics (see TestPlans), as in endSQL: the lookups name
// the id alone, and status, worker and token are tested on the locked row outside it. A
// join of runs with the input on those columns was planned, on a fresh database, as a walk
// of runs_running (every running run of every worker) with the input scanned once
// per run of the worker: each heartbeat cost all running runs plus held x held, which
// 1,000 agents holding 4 runs each made take seconds (BENCHMARKS.md, Scale). Likewise each
// lease's session is read from its worker's row by primary key, not matched against the
// batch's workers.
const heartbeatSQL = `WITH w AS (
		UPDATE workers w SET last_heartbeat = $3
		FROM (
			SELECT l.id FROM unnest($1::text[], $2::text[]) AS b(worker_id, session)
			CROSS JOIN LATERAL (
				SELECT k.id, k.session FROM workers k
				WHERE k.id = b.worker_id
				FOR UPDATE
				LIMIT 1
			) l
			WHERE b.session = '' OR b.session = l.session
		) found
		WHERE w.id = found.id
		RETURNING w.id, w.session, w.state
	), held AS MATERIALIZED (
		SELECT h.run_id AS id FROM unnest($4::text[], $5::text[], $6::text[], $7::text[]) AS h(run_id, token, worker_id, session)
		CROSS JOIN LATERAL (
			SELECT r.id, r.status, r.lease_token FROM runs r
			WHERE r.id = h.run_id
			LIMIT 1
		) seen
		CROSS JOIN LATERAL (
			SELECT r.status, r.worker_id, r.lease_token FROM runs r
			WHERE r.id = seen.id AND seen.status = 'running' AND seen.lease_token = h.token
			FOR UPDATE
			LIMIT 1
		) l
		WHERE l.status = 'running' AND l.worker_id = h.worker_id AND l.lease_token = h.token
			AND (SELECT h.session = '' OR k.session = h.session FROM workers k WHERE k.id = h.worker_id)
	), ext AS (
		UPDATE runs r SET lease_expires_at = $8 FROM held WHERE r.id = held.id
		RETURNING r.id, r.worker_id, r.cancel_requested
	)
	SELECT true, id, session, state = 'draining' FROM w
	UNION ALL
	SELECT false, id, worker_id, cancel_requested FROM ext`

// lastAttemptsSQL returns, of the runs $1, the status of the latest attempt each worker
// ended.
const lastAttemptsSQL = `SELECT DISTINCT ON (run_id, worker_id) run_id, worker_id, status FROM attempts
	WHERE run_id = ANY($1) ORDER BY run_id, worker_id, n DESC`

// heartbeatArgs are heartbeatSQL's arguments for p.
func heartbeatArgs(p *store.HeartbeatParams) []any {
	beats := slices.Clone(p.Beats)
	slices.SortFunc(beats, func(a, b store.Beat) int { return strings.Compare(a.WorkerID, b.WorkerID) })
	workers, sessions := make([]string, len(beats)), make([]string, len(beats))
	type ref struct{ run, token, worker, session string }
	var held []ref
	for i, b := range beats {
		workers[i], sessions[i] = b.WorkerID, b.Session
		for _, h := range b.Held {
			held = append(held, ref{h.RunID, h.Token, b.WorkerID, b.Session})
		}
	}
	slices.SortFunc(held, func(a, b ref) int { return strings.Compare(a.run, b.run) })
	ids, tokens := make([]string, len(held)), make([]string, len(held))
	hworkers, hsessions := make([]string, len(held)), make([]string, len(held))
	for i, h := range held {
		ids[i], tokens[i], hworkers[i], hsessions[i] = h.run, h.token, h.worker, h.session
	}
	return []any{workers, sessions, utc(p.Now), ids, tokens, hworkers, hsessions, utc(p.Now.Add(p.LeaseTTL))}
}

// Heartbeat records the heartbeats of workers and extends the leases they say they hold
// that are still their own, in one statement. See store.Store.Heartbeat.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]store.HeartbeatResult, error) {
	var (
		found map[string]workerBeat // by worker id
		valid map[runWorker]bool    // extended leases: cancel requested
	)
	args := heartbeatArgs(p)
	err := s.retry(ctx, func() error {
		found, valid = make(map[string]workerBeat, len(p.Beats)), make(map[runWorker]bool)
		rows, err := s.pool.Query(ctx, heartbeatSQL, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				isWorker, flag bool
				id, other      string
			)
			if err := rows.Scan(&isWorker, &id, &other, &flag); err != nil {
				return err
			}
			if isWorker {
				found[id] = workerBeat{session: other, draining: flag}
			} else {
				valid[runWorker{id, other}] = flag
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, translate(err, "heartbeat of %d workers", len(p.Beats))
	}
	out := make([]store.HeartbeatResult, len(p.Beats))
	var lost []runWorker
	for i, b := range p.Beats {
		w, ok := found[b.WorkerID]
		if !ok || b.Session != "" && b.Session != w.session {
			out[i].Err = fmt.Errorf("heartbeat from %s: worker: %w", b.WorkerID, model.ErrNotFound)
			continue
		}
		res := &out[i]
		res.Draining, res.Lost, res.Cancel = w.draining, []string{}, []string{}
		for _, h := range b.Held {
			cancel, ok := valid[runWorker{h.RunID, b.WorkerID}]
			switch {
			case !ok && !slices.Contains(res.Lost, h.RunID):
				res.Lost = append(res.Lost, h.RunID)
				lost = append(lost, runWorker{h.RunID, b.WorkerID})
			case ok && cancel && !slices.Contains(res.Cancel, h.RunID):
				res.Cancel = append(res.Cancel, h.RunID)
			}
		}
		slices.Sort(res.Cancel)
	}
	if len(lost) == 0 {
		return out, nil
	}
	runs := make([]string, len(lost))
	for i, l := range lost {
		runs[i] = l.run
	}
	ended, err := s.endedBy(ctx, runs)
	if err != nil {
		return nil, fmt.Errorf("heartbeat of %d workers: %w", len(p.Beats), err)
	}
	for i, b := range p.Beats {
		if out[i].Err != nil || len(out[i].Lost) == 0 {
			continue
		}
		res := &out[i]
		kept := res.Lost[:0]
		for _, run := range res.Lost {
			if ended[runWorker{run, b.WorkerID}] {
				res.Ended = append(res.Ended, run)
			} else {
				kept = append(kept, run)
			}
		}
		res.Lost = kept
	}
	return out, nil
}

// workerBeat is what heartbeatSQL returns of a worker.
type workerBeat struct {
	session  string
	draining bool
}

// runWorker is a lease of run to worker.
type runWorker struct{ run, worker string }

// endedBy returns, for the runs, the (run, worker) pairs whose latest attempt by that
// worker was recorded with a status other than lost: the worker's completion was accepted.
func (s *Store) endedBy(ctx context.Context, runs []string) (map[runWorker]bool, error) {
	rows, err := s.pool.Query(ctx, lastAttemptsSQL, runs)
	if err != nil {
		return nil, translate(err, "last attempts")
	}
	ended := map[runWorker]bool{}
	var runID, workerID, status string
	_, err = pgx.ForEachRow(rows, []any{&runID, &workerID, &status}, func() error {
		if status != string(model.AttemptLost) {
			ended[runWorker{runID, workerID}] = true
		}
		return nil
	})
	if err != nil {
		return nil, translate(err, "last attempts")
	}
	return ended, nil
}

// ending is one attempt to end and what becomes of its run (scheduler.Decide): for a
// succeeded or cancelled attempt decided from the completion alone, for a failing one from
// the run locked in the same transaction and its job's retry policy.
type ending struct {
	c store.Completion
	o scheduler.Outcome
}

// decided is the ending of c when its outcome does not depend on the run
// (!scheduler.NeedsRun(c.Status)).
func decided(c store.Completion, now time.Time) ending {
	return ending{c: c, o: scheduler.Decide(scheduler.Ending{Status: c.Status, Error: c.Error}, now, 0.5)}
}

// decide is the ending of c, an attempt of run (locked, as it was before the end) under
// policy; u spreads the backoff.
func decide(run *runRow, policy model.RetryPolicy, c store.Completion, now time.Time, u float64) ending {
	return ending{c: c, o: scheduler.Decide(scheduler.Ending{Attempt: run.Attempt, MaxAttempts: run.MaxAttempts,
		Disruptions: run.Disruptions, CancelRequested: run.CancelRequested, Policy: policy, Status: c.Status, ExitCode: c.ExitCode, Error: c.Error}, now, u)}
}

// endSQL ends the attempts of $1.. whose run is still running with that lease token: it
// writes each run's outcome ($6..$10 and $12, decided in Go) and the attempt to the history
// (finished at $11), in one statement. The input is
// sorted by run id and each run is locked through a lateral primary-key lookup, so runs are
// locked in id order whatever the plan of the update (every batch that waits for run locks
// takes them in id order: they cannot deadlock each other). The run keeps worker_id and
// attempt_started_at (reads hide them once it is not running), so the attempt row is made
// from the updated row.
//
// The plan must not depend on statistics (see TestPlans): the lateral lookup names the id
// alone, and status and token are tested on the locked row outside it (LIMIT 1 keeps the
// planner from pushing them back in). Had the lookup said status = 'running', the planner
// could walk runs_running, a partial index it believes tiny, through every running
// run per completion. The filter on the lookup's output also makes cur look like a single
// row, so the update joins it to runs by primary key, never by hashing a sequential scan
// of runs (the cheaper plan for the table's size when a connection first plans it on a
// fresh database, and kept as the connection's generic plan).
var endSQL = `WITH c AS (
		SELECT c.*
		FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[], $5::text[], $6::text[],
			$7::timestamptz[], $8::text[], $9::text[], $10::timestamptz[], $12::int4[])
			AS c(run_id, token, astatus, exit_code, error, st, new_sched, pending_code,
				pending_reason, finished, disrupted)
	), cur AS MATERIALIZED (
		SELECT c.* FROM c CROSS JOIN LATERAL (
			SELECT r.status, r.lease_token FROM runs r
			WHERE r.id = c.run_id
			FOR UPDATE
			LIMIT 1
		) l
		WHERE l.status = 'running' AND l.lease_token = c.token
	), u AS (
		UPDATE runs r SET
			status = cur.st,
			scheduled_for = coalesce(cur.new_sched, r.scheduled_for),
			pending_code = cur.pending_code,
			pending_reason = cur.pending_reason,
			finished_at = cur.finished,
			error = cur.error,
			disruptions = r.disruptions + cur.disrupted,
			lease_token = NULL,
			lease_expires_at = NULL
		FROM cur
		WHERE r.id = cur.run_id
		RETURNING r.*, cur.token AS ended_token, cur.astatus, cur.exit_code
	), att AS (
		INSERT INTO attempts (run_id, n, worker_id, status, exit_code, error, started_at, finished_at)
		SELECT u.id, u.attempt, coalesce(u.worker_id, ''), u.astatus, u.exit_code, u.error,
			coalesce(u.attempt_started_at, $11), $11
		FROM u
	), freed AS (
		UPDATE run_slots s SET state = 'done'
		FROM u WHERE s.run_id = u.id AND u.status IN ('succeeded', 'failed', 'cancelled') AND s.state <> 'done'
		RETURNING s.run_id, s.key
	), outbox AS (
		INSERT INTO dep_outbox (run_id)
		SELECT u.id FROM u WHERE u.has_dependants AND u.status IN ('succeeded', 'failed', 'cancelled')
		ON CONFLICT DO NOTHING
	)
	SELECT ` + endedCols + `, u.ended_token, (SELECT f.key FROM freed f WHERE f.run_id = u.id) FROM u`

// endedCols are the columns of an ended run that endSQL returns, in the order scanEnded
// reads them: the run as the end left it (store.Ended), without what an end does not
// change and no caller of one reads. Returning the whole row (runCols) made a batch of
// 500 successful completions cost ~3 µs more Go CPU per run in decoding (args, labels, the
// the lease columns) than the statement before issue 10, which returned 29 of those columns.
const endedCols = `u.id, u.job_id, u.job_name, u.namespace, u.status, u.pending_code, u.pending_reason,
	u.queue, u.priority, u.trigger_kind, u.scheduled_for, u.started_at, u.finished_at, u.attempt,
	u.max_attempts, u.cancel_requested, u.error, u.req_cpu, u.req_memory_mb, u.req_gpu,
	u.has_dependants, u.disruptions, CASE WHEN u.trigger_kind = 'cron' THEN coalesce(u.instant, u.scheduled_for) END`

// ended is a run whose attempt endSQL ended, the lease token the ending carried, and the
// concurrency key whose slot the run freed ("" when none).
type ended struct {
	run   *model.Run
	token string
	freed string
}

// endAttempts runs endSQL over es and returns the changed runs by id.
func endAttempts(ctx context.Context, q querier, now time.Time, es []ending) (map[string]ended, error) {
	rows, err := q.Query(ctx, endSQL, endArgs(now, es)...)
	if err != nil {
		return nil, translate(err, "end attempts")
	}
	defer rows.Close()
	out := make(map[string]ended, len(es))
	for rows.Next() {
		var (
			r                        model.Run
			status, pending, trigger string
			token                    string
			freed                    *string
		)
		if err := rows.Scan(&r.ID, &r.JobID, &r.JobName, &r.Namespace, &status, &pending, &r.PendingReason,
			&r.Queue, &r.Priority, &trigger, &r.ScheduledFor, &r.StartedAt, &r.FinishedAt, &r.Attempt,
			&r.MaxAttempts, &r.CancelRequested, &r.Error, &r.Requirements.CPU, &r.Requirements.MemoryMB,
			&r.Requirements.GPU, &r.HasDependants, &r.Disruptions, &r.Instant, &token, &freed); err != nil {
			return nil, translate(err, "end attempts")
		}
		r.Status, r.PendingCode, r.Trigger = model.RunStatus(status), model.PendingCode(pending), model.Trigger(trigger)
		r.ScheduledFor, r.StartedAt, r.FinishedAt, r.Instant = r.ScheduledFor.UTC(), utcPtr(r.StartedAt), utcPtr(r.FinishedAt), utcPtr(r.Instant)
		e := ended{run: &r, token: token}
		if freed != nil {
			e.freed = *freed
		}
		out[r.ID] = e
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "end attempts")
	}
	return out, nil
}

// endArgs are endSQL's arguments for es, sorted by run id (the order endSQL locks runs in).
func endArgs(now time.Time, es []ending) []any {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b ending) int { return strings.Compare(a.c.RunID, b.c.RunID) })
	n := len(es)
	var (
		runID, token, astatus, errMsg, newStatus, pending, reason = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		exit                                                      = make([]*int32, n)
		disrupted                                                 = make([]int32, n)
		sched, finished                                           = make([]*time.Time, n), make([]*time.Time, n)
	)
	for i, e := range es {
		runID[i], token[i], astatus[i], errMsg[i] = e.c.RunID, e.c.Token, string(e.c.Status), e.o.Error
		if e.c.ExitCode != nil {
			v := int32(*e.c.ExitCode)
			exit[i] = &v
		}
		newStatus[i], pending[i], reason[i], finished[i] = string(e.o.Status), string(e.o.PendingCode), e.o.PendingReason, e.o.FinishedAt
		if e.o.Disrupted {
			disrupted[i] = 1
		}
		if !e.o.ScheduledFor.IsZero() {
			at := utc(e.o.ScheduledFor)
			sched[i] = &at
		}
	}
	return []any{runID, token, astatus, exit, errMsg, newStatus, sched, pending, reason, finished, now, disrupted}
}

// lockForEndSQL reads and locks, in id order, the runs that match a condition (%[2]s), with
// a retry policy (%[1]s, see policyOf). %[3]s is a locking option (SKIP LOCKED).
const lockForEndSQL = `SELECT ` + runCols + `, %[1]s
	FROM runs r
	WHERE %[2]s
	ORDER BY r.id
	FOR UPDATE OF r%[3]s`

// policyOf is the retry policy expression of lockForEndSQL: every run's job's when param is
// 0, else only for the runs whose id is in the array parameter $param (the others get NULL),
// so that a completion batch reads the job specs of its failed attempts alone.
func policyOf(param int) string {
	const retry = `(` + runSpec + `)->'retry'`
	if param == 0 {
		return retry
	}
	return fmt.Sprintf(`CASE WHEN r.id = ANY($%d::text[]) THEN %s END`, param, retry)
}

type lockedRun struct {
	run    *runRow
	policy model.RetryPolicy
}

func lockForEnd(ctx context.Context, q querier, policy, where, lockOpt string, args ...any) ([]lockedRun, error) {
	rows, err := q.Query(ctx, fmt.Sprintf(lockForEndSQL, policy, where, lockOpt), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []lockedRun
	for rows.Next() {
		var (
			r                        runRow
			status, pending, trigger string
			args, retry              []byte
		)
		if err := rows.Scan(append(runDest(&r, &status, &pending, &trigger, &args), &retry)...); err != nil {
			return nil, err
		}
		fixRun(&r, status, pending, trigger, args)
		lr := lockedRun{run: &r}
		if len(retry) > 0 && string(retry) != "null" {
			if err := json.Unmarshal(retry, &lr.policy); err != nil {
				return nil, fmt.Errorf("run %s: decode retry policy: %w", r.ID, err)
			}
		}
		out = append(out, lr)
	}
	return out, rows.Err()
}

// CompleteAttempts records the ends of attempts in one transaction. Completions that need
// no retry decision (succeeded, cancelled) are one statement; failing ones first have their
// runs locked and read, with the job's retry policy, to decide their outcome in Go.
func (s *Store) CompleteAttempts(ctx context.Context, p *store.CompleteAttemptsParams) ([]store.CompletionResult, error) {
	now := utc(p.Now)
	res := make([]store.CompletionResult, len(p.Completions))
	seen := make(map[string]bool, len(p.Completions))
	var (
		es       []ending
		failIDs  []string
		dup      = make([]bool, len(p.Completions))
		anyFails bool
	)
	for i, c := range p.Completions {
		if seen[c.RunID] {
			dup[i] = true // the first completion of the run spent the lease
			continue
		}
		seen[c.RunID] = true
		c.Status = scheduler.RecordedStatus(c.Status)
		if !scheduler.NeedsRun(c.Status) {
			es = append(es, decided(c, now))
			continue
		}
		es = append(es, ending{c: c}) // decided once its run is locked
		anyFails = true
		failIDs = append(failIDs, c.RunID)
	}
	var (
		changed map[string]ended
		inTx    map[string][]*model.Run // dependants resolved in the transaction, by upstream
	)
	err := s.retry(ctx, func() error {
		if !anyFails {
			var err error
			changed, err = endAttempts(ctx, s.pool, now, es)
			return err
		}
		// Lock every run of the batch, in id order, reading the retry policy of the
		// failing ones; then decide their outcomes and end them all.
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			ids := make([]string, len(es))
			for i, e := range es {
				ids[i] = e.c.RunID
			}
			locked, err := lockForEnd(ctx, tx, policyOf(2), `r.id = ANY($1)`, "", ids, failIDs)
			if err != nil {
				return translate(err, "lock runs")
			}
			byID := make(map[string]lockedRun, len(locked))
			for _, l := range locked {
				byID[l.run.ID] = l
			}
			ended := slices.Clone(es)
			for i, e := range ended {
				l, ok := byID[e.c.RunID]
				if !scheduler.NeedsRun(e.c.Status) || !ok || l.run.LeaseToken != e.c.Token {
					continue
				}
				ended[i] = decide(l.run, l.policy, e.c, now, store.Uniform(p.Rand))
			}
			if changed, err = endAttempts(ctx, tx, now, ended); err != nil {
				return err
			}
			inTx = map[string][]*model.Run{}
			for _, e := range changed {
				if inTx[e.run.ID], err = resolveInTx(ctx, tx, []*model.Run{e.run}, now); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("complete attempts: %w", err)
	}
	resolved := inTx
	if !anyFails {
		// Ended by a statement of its own, which put the runs with dependants in the
		// outbox: resolve them now (ResolvePending does it after a crash).
		var ended []*model.Run
		for _, e := range changed {
			ended = append(ended, e.run)
		}
		if ids := dependantsEnded(ended); len(ids) > 0 {
			if resolved, err = s.resolveOutbox(ctx, ids, now); err != nil {
				return nil, fmt.Errorf("complete attempts: %w", err)
			}
		}
	}
	for i, c := range p.Completions {
		e, ok := changed[c.RunID]
		if dup[i] || !ok || e.token != c.Token {
			res[i].Err = fmt.Errorf("complete run %s: %w", c.RunID, model.ErrLeaseLost)
			continue
		}
		res[i].Run = e.run
		res[i].Admitted = append(res[i].Admitted, resolved[c.RunID]...)
		if e.freed != "" {
			// The slot was freed with the end; its held runs are admitted now, in a
			// transaction of their own (AdmitHeld repairs a crash in between).
			admitted, err := s.admitKeys(ctx, []string{e.freed}, now)
			if err != nil {
				return nil, fmt.Errorf("complete attempts: %w", err)
			}
			res[i].Admitted = append(res[i].Admitted, admitted...)
		}
	}
	return res, nil
}

// expiredWhere selects (for lockForEnd) at most $2 running runs whose lease expired before
// $1, earliest first, skipping those another server is rescuing. The innermost query takes
// each queue's expired runs from runs_running (at most $2 each); the middle one locks the
// earliest $2 of them (and rechecks them as it locks); the outer one reads them by primary
// key.
const expiredWhere = `r.id = ANY (ARRAY(
		SELECT x.id FROM runs x WHERE x.id IN (
			SELECT e.id FROM queues q CROSS JOIN LATERAL (
				SELECT e.id, e.lease_expires_at FROM runs e
				WHERE e.status = 'running' AND e.queue = q.name AND e.lease_expires_at < $1
				ORDER BY e.lease_expires_at LIMIT $2) e)
			AND x.status = 'running' AND x.lease_expires_at < $1
		ORDER BY x.lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`

// RescueExpired ends, as lost, the attempts whose lease expired before Now (at most Limit,
// earliest first), applying the retry rules. Runs another server is rescuing are skipped.
func (s *Store) RescueExpired(ctx context.Context, p *store.RescueExpiredParams) ([]*model.Run, error) {
	now := utc(p.Now)
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	var out []*model.Run
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		locked, err := lockForEnd(ctx, tx, policyOf(0), expiredWhere, " SKIP LOCKED", now, limit)
		if err != nil {
			return translate(err, "lock expired leases")
		}
		out, err = endLost(ctx, tx, locked, scheduler.LeaseExpired, now, p.Rand)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rescue expired leases: %w", err)
	}
	if out == nil {
		out = []*model.Run{}
	}
	return out, nil
}

// endLost ends the running attempts of locked runs as lost, with error msg, and returns
// them followed by the held runs that took the slots they freed.
func endLost(ctx context.Context, tx pgx.Tx, locked []lockedRun, msg string, now time.Time,
	rand func() float64) ([]*model.Run, error) {
	if len(locked) == 0 {
		return nil, nil
	}
	es := make([]ending, len(locked))
	for i, l := range locked {
		c := store.Completion{RunID: l.run.ID, Token: l.run.LeaseToken, Status: model.AttemptLost, Error: msg}
		es[i] = decide(l.run, l.policy, c, now, store.Uniform(rand))
	}
	changed, err := endAttempts(ctx, tx, now, es)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Run, 0, len(changed))
	var keys []string
	for _, l := range locked {
		if e, ok := changed[l.run.ID]; ok {
			a := model.Attempt{RunID: l.run.ID, N: l.run.Attempt, WorkerID: l.run.WorkerID,
				Status: model.AttemptLost, Error: msg, FinishedAt: &now}
			if l.run.attemptStartedAt != nil {
				a.StartedAt = *l.run.attemptStartedAt
			}
			e.run.Attempts = []model.Attempt{a}
			out = append(out, e.run)
			if e.freed != "" {
				keys = append(keys, e.freed)
			}
		}
	}
	// The runs that ended freed their slots in endSQL; held runs take them now.
	slices.Sort(keys)
	for _, key := range slices.Compact(keys) {
		admitted, err := store.AdmitHeld(slotTx{ctx, tx}, key, now)
		if err != nil {
			return nil, err
		}
		out = append(out, admitted...)
	}
	resolved, err := resolveInTx(ctx, tx, out, now)
	if err != nil {
		return nil, err
	}
	return append(out, resolved...), nil
}

// resolveInTx resolves, in tx, the dependants of the runs that endSQL ended in tx, and
// takes them off the outbox it put them in.
func resolveInTx(ctx context.Context, tx pgx.Tx, runs []*model.Run, now time.Time) ([]*model.Run, error) {
	ids := dependantsEnded(runs)
	if len(ids) == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM dep_outbox WHERE run_id = ANY($1::text[])`, ids); err != nil {
		return nil, fmt.Errorf("resolve dependencies: %w", err)
	}
	return store.Resolve(depTx{ctx, tx}, runs, now)
}
