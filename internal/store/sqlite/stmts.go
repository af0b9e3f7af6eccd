package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// writeStmts are the writer's prepared statements. The writer has one connection, so each
// is prepared once and reused by every transaction.
type writeStmts struct {
	db *sql.DB

	insertJob      *sql.Stmt
	insertRun      *sql.Stmt
	deleteJob      *sql.Stmt
	ensureQueue    *sql.Stmt
	jobByKey       *sql.Stmt
	firstRun       *sql.Stmt
	jobForRun      *sql.Stmt
	runByKey       *sql.Stmt
	runByCron      *sql.Stmt
	runExists      *sql.Stmt
	runLease       *sql.Stmt
	jobSpec        *sql.Stmt
	endAttemptRun  *sql.Stmt
	activeRun      *sql.Stmt
	cancelPending  *sql.Stmt
	cancelRunning  *sql.Stmt
	extendLease    *sql.Stmt
	insertLogChunk *sql.Stmt
	runningCount   *sql.Stmt
	leaseQueues    *sql.Stmt
	claim          *sql.Stmt
	runStatus      *sql.Stmt
	insertDep      *sql.Stmt
	markUpstream   *sql.Stmt
	setDepsPending *sql.Stmt
	meetDeps       *sql.Stmt
	skipDeps       *sql.Stmt
	setRunnable    *sql.Stmt
	workerRoom     *sql.Stmt
	workerBooked   *sql.Stmt
	savepoint      *sql.Stmt
	release        *sql.Stmt
	rollbackTo     *sql.Stmt

	// slotsUsed is set once any run was created under a concurrency limit; until then
	// ending runs need not look for slots to free.
	slotsUsed atomic.Bool

	mu     sync.Mutex
	dyn    map[string]*sql.Stmt // statements prepared on first use: lease filters, batches
	queues map[string]bool      // queues that committed transactions created or found
}

// queueKnown reports whether the queue is known to exist.
func (s *writeStmts) queueKnown(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[name]
}

// queuesExist records queues that a committed transaction created or found.
func (s *writeStmts) queuesExist(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.queues[n] = true
	}
}

// readStmts are the readers' prepared statements (database/sql prepares them on each
// reader connection as it is first used).
type readStmts struct {
	getRun         *sql.Stmt
	attemptsOf     *sql.Stmt
	jobByID        *sql.Stmt
	anonymousRun   *sql.Stmt
	jobByName      *sql.Stmt
	runExists      *sql.Stmt
	readLogs       *sql.Stmt
	depthQueued    *sql.Stmt
	depthScheduled *sql.Stmt
	depthWaiting   *sql.Stmt
	depthRunning   *sql.Stmt
	workerUsage    *sql.Stmt
}

// statusRare is the WHERE of runs_rare_status (migration 0002): the states it covers, as a
// chain of ORs rather than an IN list, which SQLite would evaluate by building an ephemeral
// table for every row written. A query that walks that index repeats this term: SQLite uses
// a partial index only when the query's WHERE implies the index's WHERE.
const statusRare = `(status = 'waiting' OR status = 'scheduled' OR status = 'failed' OR status = 'cancelled' OR status = 'skipped')`

// statusPending lists the states before running, as SQL.
const statusPending = `('waiting', 'scheduled', 'queued')`

const insertRunSQL = `INSERT INTO runs (id, job_id, job_name, namespace, status, pending_code, pending_reason, queue, priority,
	trigger_kind, args, handler, req_cpu, req_memory_mb, req_gpu, req_labels, scheduled_for, created_at, started_at,
	finished_at, attempt, max_attempts, idempotency_key, cancel_requested, error, instant, spec)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`

func prepareWrite(ctx context.Context, db *sql.DB) (*writeStmts, error) {
	s := &writeStmts{db: db, dyn: map[string]*sql.Stmt{}, queues: map[string]bool{}}
	var errs []error
	p := func(q string) *sql.Stmt {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			errs = append(errs, fmt.Errorf("prepare %q: %w", firstLine(q), err))
		}
		return st
	}
	s.insertJob = p(`INSERT INTO jobs (id, namespace, name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu,
		req_labels, enabled, next_fire_at, idempotency_key, request_hash, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`)
	s.insertRun = p(insertRunSQL)
	s.deleteJob = p(`DELETE FROM jobs WHERE id = ?`)
	s.ensureQueue = p(`INSERT INTO queues (name, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`)
	s.jobByKey = p(`SELECT ` + jobCols + ` FROM jobs WHERE namespace = ? AND idempotency_key = ?`)
	s.firstRun = p(`SELECT ` + runCols + ` FROM runs WHERE job_id = ? ORDER BY id LIMIT 1`)
	s.jobForRun = p(`SELECT ` + jobInfoCols + ` FROM jobs WHERE id = ?`)
	s.runByKey = p(`SELECT ` + runCols + ` FROM runs WHERE idempotency_key = ?`)
	s.runByCron = p(runByCronSQL)
	s.runExists = p(`SELECT 1 FROM runs WHERE id = ?`)
	s.runLease = p(`SELECT status, attempt, coalesce(lease_token, ''), coalesce(worker_id, '') FROM runs WHERE id = ?`)
	s.jobSpec = p(jobSpecSQL)
	// Any other ending, once decided: final (scheduled_for NULL keeps it) or retried.
	s.endAttemptRun = p(`UPDATE runs SET status = ?, pending_code = ?, pending_reason = ?,
		scheduled_for = coalesce(?, scheduled_for), finished_at = ?, error = ?, cancel_requested = ?,
		disruptions = disruptions + ?
		WHERE id = ? RETURNING ` + runCols)
	s.activeRun = p(`SELECT ` + runCols + ` FROM runs WHERE id = ? AND status = 'running' AND lease_token = ?`)
	s.cancelPending = p(`UPDATE runs SET status = 'cancelled', finished_at = ?, error = ?, pending_code = '', pending_reason = ''
		WHERE id = ? AND status IN ` + statusPending + ` RETURNING ` + runCols)
	s.cancelRunning = p(`UPDATE runs SET cancel_requested = 1, error = ?
		WHERE id = ? AND status = 'running' AND cancel_requested = 0 RETURNING ` + runCols)
	s.extendLease = p(`UPDATE runs SET lease_expires_at = ?
		WHERE id = ? AND status = 'running' AND lease_token = ? AND worker_id = ? RETURNING cancel_requested`)
	s.insertLogChunk = p(`INSERT INTO log_chunks (run_id, attempt, seq, stream, data, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`)
	s.runningCount = p(runningCountSQL)
	s.leaseQueues = p(`SELECT name, max_concurrency, rate, rate_per_us FROM queues WHERE paused = 0 ORDER BY priority DESC, name`)
	s.claim = p(claimSQL)
	s.runStatus = p(`SELECT status FROM runs WHERE id = ?`)
	s.insertDep = p(`INSERT INTO run_deps (run_id, upstream_run_id, condition) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`)
	s.markUpstream = p(`UPDATE runs SET has_dependants = 1 WHERE id = ? AND has_dependants = 0`)
	s.setDepsPending = p(`UPDATE runs SET deps_pending = ? WHERE id = ?`)
	s.meetDeps = p(meetSQL)
	s.skipDeps = p(skipSQL)
	s.setRunnable = p(`UPDATE runs SET status = ?, pending_code = ?, pending_reason = ? WHERE id = ?`)
	s.workerRoom = p(`SELECT labels, cap_cpu, cap_memory_mb, cap_gpu FROM workers WHERE id = ?`)
	s.workerBooked = p(workerBookedSQL)
	s.savepoint = p(`SAVEPOINT fast`)
	s.release = p(`RELEASE fast`)
	s.rollbackTo = p(`ROLLBACK TO fast`)
	if err := errors.Join(errs...); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// leaseStmt returns the candidates statement of LeaseRuns for one filter shape, preparing
// it once.
func (s *writeStmts) leaseStmt(ctx context.Context, handlers int, commands bool) (*sql.Stmt, error) {
	key := fmt.Sprintf("%d/%t", handlers, commands)
	s.mu.Lock()
	st, ok := s.dyn[key]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	// Prepare without holding mu: preparing waits for the writer's one connection, and the
	// transaction holding it may need mu (wtx.batch) before it can let go.
	st, err := s.db.PrepareContext(ctx, candidatesSQL(handlers, commands))
	if err != nil {
		return nil, fmt.Errorf("prepare lease: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.dyn[key]; ok {
		_ = st.Close()
		return prev, nil
	}
	s.dyn[key] = st
	return st, nil
}

// candidatesSQL lists, in lease order, up to N runs of one queue that each fit the asking
// worker: its queued runs and its scheduled runs due at $now (a due run is leased straight
// from scheduled: see service.Promoter), each kind through its own index and limit. A run
// fits when the worker's labels ($labels, a JSON object) include the run's requirement
// labels, and the run needs no more cpu, memory and gpu than is free. It optionally keeps
// only some handler kinds. Runs without requirements pass the fit terms at their first
// comparison. A requirement label's key is spliced into a JSON path: label keys are kept
// to placement.LabelPattern, which has no quotes. The parameters are numbered: the queue
// (?1), the handlers, then cpu, memory, gpu, labels, N and now.
func candidatesSQL(handlers int, commands bool) string {
	n := handlers + 2 // the first parameter after the handlers
	var filter string
	switch {
	case handlers == 0 && !commands:
	case handlers == 0 && commands:
		filter = ` AND handler = ''`
	default:
		list := make([]string, handlers)
		for i := range list {
			list[i] = fmt.Sprintf("?%d", i+2)
		}
		filter = ` AND (handler IN (` + strings.Join(list, ", ") + `)`
		if commands {
			filter += ` OR handler = ''`
		}
		filter += `)`
	}
	fit := fmt.Sprintf(`
			AND req_cpu <= ?%d AND req_memory_mb <= ?%d AND req_gpu <= ?%d
			AND (req_labels = '' OR NOT EXISTS (SELECT 1 FROM json_each(req_labels) AS l
				WHERE json_extract(?%d, '$."' || l.key || '"') IS NOT l.value))`, n, n+1, n+2, n+3)
	cols := `rowid, req_cpu, req_memory_mb, req_gpu, req_labels, scheduled_for, priority, id`
	return fmt.Sprintf(`SELECT rowid, req_cpu, req_memory_mb, req_gpu, req_labels, scheduled_for FROM (
		SELECT * FROM (SELECT %[1]s FROM runs INDEXED BY runs_queued
			WHERE status = 'queued' AND queue = ?1%[2]s%[3]s
			ORDER BY priority DESC, scheduled_for, id LIMIT ?%[4]d)
		UNION ALL
		SELECT * FROM (SELECT %[1]s FROM runs INDEXED BY runs_due
			WHERE status = 'scheduled' AND queue = ?1 AND scheduled_for <= ?%[5]d%[2]s%[3]s
			ORDER BY scheduled_for LIMIT ?%[4]d)
	) ORDER BY priority DESC, scheduled_for, id LIMIT ?%[4]d`, cols, filter, fit, n+4, n+5)
}

// claimSQL leases the runs whose rowids are in the JSON array $5. The writer is the only
// connection that writes, so nothing can claim them between candidatesSQL and this. A lease
// token is a random prefix drawn once per call (128 bits) followed by the run's rowid:
// unguessable, and unique per lease since no two calls share a prefix and no two runs a
// rowid (randomblob per row costs a tenth of the statement).
const claimSQL = `UPDATE runs SET status = 'running', attempt = attempt + 1, worker_id = ?,
		lease_token = ? || rowid, lease_expires_at = ?,
		started_at = coalesce(started_at, ?), attempt_started_at = ?, pending_code = '', pending_reason = ''
		WHERE rowid IN (SELECT value FROM json_each(?))
		RETURNING ` + runCols + `, ` + runSpecSQL

// SQL shared by methods and the query-plan test.
const (
	// The spec of a run's job (in a statement on runs): the run's own when it is anonymous
	// (store.Anonymous), else its job row's; NULL once the job was deleted.
	runSpecSQL = `coalesce(runs.spec, (SELECT spec FROM jobs WHERE jobs.id = runs.job_id))`
	// Whether a run's job exists (in a statement on runs): it is anonymous or has a row.
	runHasJobSQL = `(runs.spec IS NOT NULL OR EXISTS (SELECT 1 FROM jobs WHERE jobs.id = runs.job_id))`
	// The spec of job ?1: its row's, or the one its anonymous run carries.
	jobSpecSQL = `SELECT spec FROM jobs WHERE id = ?1
		UNION ALL SELECT spec FROM runs INDEXED BY runs_job WHERE job_id = ?1 AND spec IS NOT NULL LIMIT 1`
	// The anonymous run of job ? with the spec it carries (GetJob).
	anonymousRunSQL = `SELECT ` + runCols + `, spec FROM runs INDEXED BY runs_job
		WHERE job_id = ? AND spec IS NOT NULL ORDER BY id LIMIT 1`
	// Materializing anonymous jobs (the JSON array ?1 of their ids): their jobs rows made
	// from their runs, then the spec taken off the runs whose job got its row (one whose
	// name is taken by a job named like its id stays anonymous).
	materializeJobsSQL = `INSERT INTO jobs (id, namespace, name, spec, queue, handler, req_cpu, req_memory_mb,
			req_gpu, req_labels, enabled, next_fire_at, idempotency_key, request_hash, created_at, updated_at)
		SELECT job_id, namespace, job_name, spec, queue, handler, req_cpu, req_memory_mb, req_gpu, req_labels,
			1, NULL, NULL, '', created_at, created_at
		FROM runs INDEXED BY runs_job WHERE job_id IN (SELECT value FROM json_each(?1)) AND spec IS NOT NULL
		ON CONFLICT DO NOTHING`
	materializeRunsSQL = `UPDATE runs INDEXED BY runs_job SET spec = NULL
		WHERE job_id IN (SELECT value FROM json_each(?1)) AND spec IS NOT NULL
			AND EXISTS (SELECT 1 FROM jobs WHERE jobs.id = runs.job_id)`
	// The cron run of a job and instant (index runs_cron_instant).
	runByCronSQL = `SELECT ` + runCols + ` FROM runs WHERE job_id = ? AND instant = ? AND trigger_kind = 'cron'`
	// The instants of a job's cron runs in a range.
	firedInstantsSQL = `SELECT instant FROM runs INDEXED BY runs_cron_instant
		WHERE job_id = ? AND instant BETWEEN ? AND ? AND trigger_kind = 'cron' ORDER BY instant`
	// A job's cron runs made ahead of their instant (after now) that never ran: a changed
	// schedule drops them.
	dropAheadSQL = `DELETE FROM runs INDEXED BY runs_cron_instant
		WHERE job_id = ? AND trigger_kind = 'cron' AND instant > ?
		AND status = 'scheduled' AND attempt = 0 AND pending_code = 'not_due'`
	promoteDueSQL = `UPDATE runs SET status = 'queued', pending_code = '', pending_reason = ''
		WHERE rowid IN (SELECT rowid FROM runs INDEXED BY runs_scheduled WHERE status = 'scheduled' AND scheduled_for <= ?
			ORDER BY scheduled_for LIMIT ?)`
	nextDueSQL = `SELECT scheduled_for FROM runs INDEXED BY runs_scheduled WHERE status = 'scheduled' AND scheduled_for > ?
		ORDER BY scheduled_for LIMIT 1`
	// The earliest expiry of each queue, then the earliest of those.
	nextLeaseExpirySQL = `SELECT min(e) FROM (SELECT (SELECT lease_expires_at FROM runs INDEXED BY runs_running
		WHERE status = 'running' AND queue = q.name ORDER BY lease_expires_at LIMIT 1) AS e FROM queues AS q)`
	expiredSQL = `SELECT ` + runCols + ` FROM runs INDEXED BY runs_running
		WHERE status = 'running' AND queue IN (SELECT name FROM queues) AND lease_expires_at < ?
		ORDER BY lease_expires_at LIMIT ?`
	workerRunsSQL   = `SELECT ` + runCols + ` FROM runs INDEXED BY runs_worker WHERE worker_id = ? AND status = 'running'`
	runningCountSQL = `SELECT count(*) FROM runs INDEXED BY runs_running WHERE queue = ? AND status = 'running'`
	// Queue depth, one count per active state, each on an index.
	depthQueuedSQL    = `SELECT count(*) FROM runs INDEXED BY runs_queued WHERE queue = ? AND status = 'queued'`
	depthScheduledSQL = `SELECT count(*) FROM runs INDEXED BY runs_scheduled WHERE queue = ? AND status = 'scheduled'`
	depthWaitingSQL   = `SELECT count(*) FROM runs INDEXED BY runs_rare_status
		WHERE queue = ? AND status = 'waiting' AND ` + statusRare
	workerUsageSQL = `SELECT count(*), coalesce(sum(req_cpu), 0), coalesce(sum(req_memory_mb), 0), coalesce(sum(req_gpu), 0)
		FROM runs INDEXED BY runs_worker WHERE worker_id = ? AND status = 'running'`
	// What running runs book, per worker (runs_placed, migration 0004): of one worker, and
	// of all.
	placedTerm      = `status = 'running' AND (req_cpu > 0 OR req_memory_mb > 0 OR req_gpu > 0)`
	workerBookedSQL = `SELECT coalesce(sum(req_cpu), 0), coalesce(sum(req_memory_mb), 0), coalesce(sum(req_gpu), 0)
		FROM runs INDEXED BY runs_placed WHERE worker_id = ? AND ` + placedTerm
	bookedSQL = `SELECT worker_id, sum(req_cpu), sum(req_memory_mb), sum(req_gpu)
		FROM runs INDEXED BY runs_placed WHERE worker_id IS NOT NULL AND ` + placedTerm + ` GROUP BY worker_id`
	liveWorkersSQL = `SELECT id, labels, cap_cpu, cap_memory_mb, cap_gpu FROM workers
		WHERE state = 'active' AND last_heartbeat >= ? AND id != ?`
	cancelJobPendingSQL = `UPDATE runs INDEXED BY runs_job SET status = 'cancelled', finished_at = ?, error = ?,
		pending_code = '', pending_reason = '' WHERE job_id = ? AND status IN ` + statusPending + ` RETURNING ` + runCols
	cancelJobRunningSQL = `UPDATE runs INDEXED BY runs_job SET cancel_requested = 1, error = ?
		WHERE job_id = ? AND status = 'running' AND cancel_requested = 0 RETURNING ` + runCols
)

func (s *writeStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.insertJob, s.insertRun, s.deleteJob, s.ensureQueue, s.jobByKey, s.firstRun,
		s.jobForRun, s.runByKey, s.runByCron, s.runExists, s.runLease, s.jobSpec, s.endAttemptRun,
		s.activeRun, s.cancelPending, s.cancelRunning, s.extendLease, s.insertLogChunk,
		s.runningCount, s.leaseQueues, s.claim, s.runStatus, s.insertDep, s.markUpstream, s.setDepsPending,
		s.meetDeps, s.skipDeps, s.setRunnable, s.workerRoom, s.workerBooked, s.savepoint, s.release, s.rollbackTo} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	s.mu.Lock()
	for _, st := range s.dyn {
		errs = append(errs, st.Close())
	}
	s.mu.Unlock()
	return errors.Join(errs...)
}

func prepareRead(ctx context.Context, db *sql.DB) (*readStmts, error) {
	s := &readStmts{}
	var errs []error
	p := func(q string) *sql.Stmt {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			errs = append(errs, fmt.Errorf("prepare %q: %w", firstLine(q), err))
		}
		return st
	}
	s.getRun = p(`SELECT ` + runCols + ` FROM runs WHERE id = ?`)
	s.attemptsOf = p(`SELECT n, worker_id, status, exit_code, error, started_at, finished_at
		FROM attempts WHERE run_id = ? ORDER BY n`)
	s.jobByID = p(`SELECT ` + jobCols + ` FROM jobs WHERE id = ?`)
	s.anonymousRun = p(anonymousRunSQL)
	s.jobByName = p(`SELECT ` + jobCols + ` FROM jobs WHERE namespace = ? AND name = ?`)
	s.runExists = p(`SELECT 1 FROM runs WHERE id = ?`)
	s.readLogs = p(`SELECT seq, stream, data, created_at FROM log_chunks
		WHERE run_id = ? AND attempt = ? AND seq > ? ORDER BY seq LIMIT ?`)
	s.depthQueued = p(depthQueuedSQL)
	s.depthScheduled = p(depthScheduledSQL)
	s.depthWaiting = p(depthWaitingSQL)
	s.depthRunning = p(runningCountSQL)
	s.workerUsage = p(workerUsageSQL)
	if err := errors.Join(errs...); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

func (s *readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.getRun, s.attemptsOf, s.jobByID, s.anonymousRun, s.jobByName, s.runExists, s.readLogs, s.depthQueued, s.depthScheduled,
		s.depthWaiting, s.depthRunning, s.workerUsage} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func firstLine(q string) string {
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		return q[:i]
	}
	return q
}
