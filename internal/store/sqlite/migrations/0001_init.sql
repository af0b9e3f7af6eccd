-- stint schema, version 1.
--
-- Conventions: times are INTEGER microseconds since the Unix epoch, UTC. Ids are the
-- 26-character sortable strings of internal/id. Optional text keys are NULL when absent so
-- that partial unique indexes skip them. Foreign keys are not declared: the engine keeps
-- references in step itself (a run outlives its job as history; retention deletes a run's
-- attempts, log chunks and dependency edges with it).

-- Jobs: definitions. spec is the JSON of model.JobSpec; queue, handler and the
-- requirements are copied out of it for filters and for the runs created from it.
CREATE TABLE jobs (
    id              TEXT    NOT NULL PRIMARY KEY,
    namespace       TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    spec            BLOB    NOT NULL,
    queue           TEXT    NOT NULL,
    handler         TEXT    NOT NULL DEFAULT '',  -- '' for command and shell jobs
    req_cpu         REAL    NOT NULL DEFAULT 0,
    req_memory_mb   INTEGER NOT NULL DEFAULT 0,
    req_gpu         INTEGER NOT NULL DEFAULT 0,
    enabled         INTEGER NOT NULL,
    next_fire_at    INTEGER,
    idempotency_key TEXT,
    request_hash    TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX jobs_namespace_name ON jobs (namespace, name);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (namespace, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_name ON jobs (name, namespace);
-- The cron timer: the earliest next fire among enabled scheduled jobs.
CREATE INDEX jobs_next_fire ON jobs (next_fire_at) WHERE next_fire_at IS NOT NULL AND enabled = 1;

-- Runs. The running attempt lives on the row (worker_id, lease_token, lease_expires_at,
-- attempt_started_at); those columns mean something only while status = 'running' and are
-- left as they were when a run leaves running (reads hide them). An attempts row is
-- written when an attempt ends.
CREATE TABLE runs (
    id                 TEXT    NOT NULL PRIMARY KEY,
    job_id             TEXT    NOT NULL,
    job_name           TEXT    NOT NULL,
    namespace          TEXT    NOT NULL,
    status             TEXT    NOT NULL,
    pending_code       TEXT    NOT NULL DEFAULT '',
    pending_reason     TEXT    NOT NULL DEFAULT '',
    queue              TEXT    NOT NULL,
    priority           INTEGER NOT NULL,
    trigger_kind       TEXT    NOT NULL,
    args               BLOB,
    handler            TEXT    NOT NULL DEFAULT '',  -- the job's handler kind, for lease filters
    req_cpu            REAL    NOT NULL DEFAULT 0,    -- the job's requirements, for used capacity
    req_memory_mb      INTEGER NOT NULL DEFAULT 0,
    req_gpu            INTEGER NOT NULL DEFAULT 0,
    scheduled_for      INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    started_at         INTEGER,
    finished_at        INTEGER,
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    idempotency_key    TEXT,
    cancel_requested   INTEGER NOT NULL DEFAULT 0,
    error              TEXT    NOT NULL DEFAULT '',
    worker_id          TEXT,
    lease_token        TEXT,
    lease_expires_at   INTEGER,
    attempt_started_at INTEGER
);
-- Dispatch: the next queued runs of a queue, in lease order.
CREATE INDEX runs_queued ON runs (queue, priority DESC, scheduled_for, id) WHERE status = 'queued';
-- Timers: due promotion.
CREATE INDEX runs_scheduled ON runs (scheduled_for) WHERE status = 'scheduled';
-- Running runs by queue and lease expiry: queue concurrency limits and depth (a prefix
-- count), lease rescue and the next expiry (a range per queue; queues are few).
CREATE INDEX runs_running ON runs (queue, lease_expires_at) WHERE status = 'running';
-- A worker's running attempts (used capacity, new session, lists).
CREATE INDEX runs_worker ON runs (worker_id) WHERE status = 'running';
-- Lists, newest first. A run's life (queued, running, succeeded) touches none of
-- runs_rare_status: lists of queued and running runs walk runs_queued and runs_running,
-- and succeeded runs, the bulk of history, are found by walking the primary key backwards.
CREATE INDEX runs_job ON runs (job_id, id);
CREATE INDEX runs_rare_status ON runs (status, id) WHERE status IN ('waiting', 'scheduled', 'failed', 'cancelled', 'skipped');
-- Dedupe: idempotency keys, and one cron run per job and instant (invariant 4).
CREATE UNIQUE INDEX runs_idempotency ON runs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX runs_cron_instant ON runs (job_id, scheduled_for) WHERE trigger_kind = 'cron';

-- Finished attempts, one row per ended attempt. The running attempt is on its run's row.
CREATE TABLE attempts (
    run_id      TEXT    NOT NULL,
    n           INTEGER NOT NULL,
    worker_id   TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    exit_code   INTEGER,
    error       TEXT    NOT NULL DEFAULT '',
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID;

-- Output of attempts, in the order the worker read it.
CREATE TABLE log_chunks (
    run_id     TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    stream     TEXT    NOT NULL,
    data       BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, attempt, seq)
);

CREATE TABLE queues (
    name            TEXT    NOT NULL PRIMARY KEY,
    priority        INTEGER NOT NULL DEFAULT 0,
    max_concurrency INTEGER NOT NULL DEFAULT 0,  -- 0: unlimited
    paused          INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE workers (
    id             TEXT    NOT NULL PRIMARY KEY,
    session        TEXT    NOT NULL,
    labels         BLOB    NOT NULL,  -- JSON object
    cap_cpu        REAL    NOT NULL,
    cap_memory_mb  INTEGER NOT NULL,
    cap_gpu        INTEGER NOT NULL,
    cap_slots      INTEGER NOT NULL,
    state          TEXT    NOT NULL,
    registered_at  INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL
) WITHOUT ROWID;

-- Dependencies between runs: run_id waits for upstream_run_id to reach condition.
CREATE TABLE run_deps (
    run_id          TEXT NOT NULL,
    upstream_run_id TEXT NOT NULL,
    condition       TEXT NOT NULL,  -- succeeded | failed | finished
    PRIMARY KEY (run_id, upstream_run_id)
) WITHOUT ROWID;
CREATE INDEX run_deps_upstream ON run_deps (upstream_run_id);

-- Pipelines: named DAGs of jobs with an optional schedule (spec is JSON).
CREATE TABLE pipelines (
    id           TEXT    NOT NULL PRIMARY KEY,
    namespace    TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    spec         BLOB    NOT NULL,
    enabled      INTEGER NOT NULL,
    next_fire_at INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX pipelines_namespace_name ON pipelines (namespace, name);
CREATE INDEX pipelines_next_fire ON pipelines (next_fire_at) WHERE next_fire_at IS NOT NULL AND enabled = 1;

-- Leadership of the once-per-cluster loops: one row per role, held until expires_at.
CREATE TABLE leader_leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
