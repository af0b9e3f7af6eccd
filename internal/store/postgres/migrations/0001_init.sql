-- stint schema, version 1. The same logical schema as the SQLite engine's first migration:
-- table and column names match; types are PostgreSQL's own (timestamptz, jsonb, bytea).
-- Empty optional strings are stored as NULL where a unique index covers them. Keys and
-- names that lists sort by use the "C" collation: byte order, as SQLite's BINARY, and the
-- cheapest to compare.

CREATE TABLE jobs (
    id              text        COLLATE "C" PRIMARY KEY,
    namespace       text        COLLATE "C" NOT NULL,
    name            text        COLLATE "C" NOT NULL,
    spec            jsonb       NOT NULL,
    enabled         boolean     NOT NULL,
    next_fire_at    timestamptz,
    idempotency_key text,
    request_hash    text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT jobs_namespace_name_key UNIQUE (namespace, name)
);
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (namespace, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The cron loop sleeps until the earliest next fire.
CREATE INDEX jobs_next_fire_at_idx ON jobs (next_fire_at) WHERE next_fire_at IS NOT NULL;

CREATE TABLE queues (
    name            text        COLLATE "C" PRIMARY KEY,
    priority        integer     NOT NULL DEFAULT 0,
    max_concurrency integer     NOT NULL DEFAULT 0,
    paused          boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

-- runs holds every run; the running attempt lives on the row (worker_id, lease_token,
-- lease_expires_at, attempt_started_at) and moves to attempts only when it ends.
-- handler is the job's handler kind ('' for command and shell jobs), copied at insert (and
-- by UpdateJob to runs not yet leased) so that leasing filters on the run row alone.
-- req_cpu, req_memory_mb and req_gpu are the job's requirements when the run was created;
-- a worker's used capacity sums them over its running runs.
CREATE TABLE runs (
    id                 text        COLLATE "C" PRIMARY KEY,
    job_id             text        COLLATE "C" NOT NULL,
    job_name           text        NOT NULL,
    namespace          text        NOT NULL,
    status             text        NOT NULL,
    pending_code       text        NOT NULL DEFAULT '',
    pending_reason     text        NOT NULL DEFAULT '',
    queue              text        COLLATE "C" NOT NULL,
    priority           integer     NOT NULL DEFAULT 0,
    trigger            text        NOT NULL,
    handler            text        NOT NULL DEFAULT '',
    req_cpu            double precision NOT NULL DEFAULT 0,
    req_memory_mb      bigint      NOT NULL DEFAULT 0,
    req_gpu            integer     NOT NULL DEFAULT 0,
    args               jsonb,
    scheduled_for      timestamptz NOT NULL,
    created_at         timestamptz NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    attempt            integer     NOT NULL DEFAULT 0,
    max_attempts       integer     NOT NULL DEFAULT 1,
    idempotency_key    text,
    cancel_requested   boolean     NOT NULL DEFAULT false,
    error              text        NOT NULL DEFAULT '',
    worker_id          text,
    lease_token        text,
    lease_expires_at   timestamptz,
    attempt_started_at timestamptz
);
-- Dispatch: the next runs of a queue.
CREATE INDEX runs_queued_idx ON runs (queue, priority DESC, scheduled_for, id)
    WHERE status = 'queued';
-- Promotion: scheduled runs that are due; NextDue.
CREATE INDEX runs_scheduled_idx ON runs (scheduled_for) WHERE status = 'scheduled';
-- Rescue: expired leases; NextLeaseExpiry.
CREATE INDEX runs_lease_expires_idx ON runs (lease_expires_at) WHERE status = 'running';
-- A worker's running attempts (register, heartbeat, worker views).
CREATE INDEX runs_worker_idx ON runs (worker_id) WHERE status = 'running';
-- A queue's running runs (MaxConcurrency).
CREATE INDEX runs_queue_running_idx ON runs (queue) WHERE status = 'running';
-- Lists: a job's runs, runs by status, newest first.
CREATE INDEX runs_job_idx ON runs (job_id, id DESC);
CREATE INDEX runs_status_idx ON runs (status, id DESC);
CREATE UNIQUE INDEX runs_idempotency_key_idx ON runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- Invariant 4: a cron job fires at most once per scheduled instant.
CREATE UNIQUE INDEX runs_cron_instant_idx ON runs (job_id, scheduled_for)
    WHERE trigger = 'cron';

-- attempts is the history of finished attempts.
CREATE TABLE attempts (
    run_id      text        NOT NULL,
    n           integer     NOT NULL,
    worker_id   text        NOT NULL DEFAULT '',
    status      text        NOT NULL,
    exit_code   integer,
    error       text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    PRIMARY KEY (run_id, n)
);

CREATE TABLE log_chunks (
    run_id     text        NOT NULL,
    attempt    integer     NOT NULL,
    seq        bigint      NOT NULL,
    stream     text        NOT NULL,
    data       bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, attempt, seq)
);

CREATE TABLE workers (
    id             text             COLLATE "C" PRIMARY KEY,
    session        text             NOT NULL,
    labels         jsonb,
    cpu            double precision NOT NULL DEFAULT 0,
    memory_mb      bigint           NOT NULL DEFAULT 0,
    gpu            integer          NOT NULL DEFAULT 0,
    slots          integer          NOT NULL DEFAULT 0,
    state          text             NOT NULL,
    registered_at  timestamptz      NOT NULL,
    last_heartbeat timestamptz      NOT NULL
);

-- run_deps are the edges between runs (run_id waits for depends_on); used by pipelines.
CREATE TABLE run_deps (
    run_id     text NOT NULL,
    depends_on text NOT NULL,
    condition  text NOT NULL DEFAULT 'succeeded',
    PRIMARY KEY (run_id, depends_on)
);
CREATE INDEX run_deps_depends_on_idx ON run_deps (depends_on);
