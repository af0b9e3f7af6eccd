-- stint schema, version 1 (PostgreSQL).
--
-- The same logical schema as the SQLite engine's first migration: the same tables, columns
-- and indexes, with PostgreSQL's own types (timestamptz, jsonb, bytea). Times are stored in
-- UTC at microsecond precision. Optional text keys are NULL when absent so that partial
-- unique indexes skip them. Keys and names that lists sort by use the "C" collation (byte
-- order, like SQLite's BINARY, and the cheapest to compare). Foreign keys are not declared:
-- the engine keeps references in step itself (a run outlives its job as history).

-- Jobs: definitions. spec is model.JobSpec as JSON; queue, handler and the requirements are
-- copied out of it for filters and for the runs created from it.
CREATE TABLE jobs (
    id              text             COLLATE "C" NOT NULL PRIMARY KEY,
    namespace       text             COLLATE "C" NOT NULL,
    name            text             COLLATE "C" NOT NULL,
    spec            jsonb            NOT NULL,
    queue           text             COLLATE "C" NOT NULL,
    handler         text             NOT NULL DEFAULT '',  -- '' for command and shell jobs
    req_cpu         double precision NOT NULL DEFAULT 0,
    req_memory_mb   bigint           NOT NULL DEFAULT 0,
    req_gpu         integer          NOT NULL DEFAULT 0,
    enabled         boolean          NOT NULL,
    next_fire_at    timestamptz,
    idempotency_key text             COLLATE "C",
    request_hash    text             NOT NULL DEFAULT '',
    created_at      timestamptz      NOT NULL,
    updated_at      timestamptz      NOT NULL
);
CREATE UNIQUE INDEX jobs_namespace_name ON jobs (namespace, name);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (namespace, idempotency_key) WHERE idempotency_key IS NOT NULL;
-- Lists across namespaces: by name, then namespace.
CREATE INDEX jobs_name ON jobs (name, namespace);
-- The cron timer: the earliest next fire among enabled scheduled jobs.
CREATE INDEX jobs_next_fire ON jobs (next_fire_at) WHERE next_fire_at IS NOT NULL AND enabled;

-- Runs. The running attempt lives on the row (worker_id, lease_token, lease_expires_at,
-- attempt_started_at), set while status = 'running' and cleared when the run leaves it; an
-- attempts row is written only when an attempt ends. handler and the requirements are the
-- job's when the run was created (UpdateJob moves the handler of runs not yet leased), so
-- that leasing filters and used capacity read the run row alone.
CREATE TABLE runs (
    id                 text             COLLATE "C" NOT NULL PRIMARY KEY,
    job_id             text             COLLATE "C" NOT NULL,
    job_name           text             NOT NULL,
    namespace          text             NOT NULL,
    status             text             NOT NULL,
    pending_code       text             NOT NULL DEFAULT '',
    pending_reason     text             NOT NULL DEFAULT '',
    queue              text             COLLATE "C" NOT NULL,
    priority           integer          NOT NULL,
    trigger_kind       text             NOT NULL,
    args               jsonb,
    handler            text             NOT NULL DEFAULT '',
    req_cpu            double precision NOT NULL DEFAULT 0,
    req_memory_mb      bigint           NOT NULL DEFAULT 0,
    req_gpu            integer          NOT NULL DEFAULT 0,
    scheduled_for      timestamptz      NOT NULL,
    created_at         timestamptz      NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    attempt            integer          NOT NULL DEFAULT 0,
    max_attempts       integer          NOT NULL,
    idempotency_key    text             COLLATE "C",
    cancel_requested   boolean          NOT NULL DEFAULT false,
    error              text             NOT NULL DEFAULT '',
    worker_id          text             COLLATE "C",
    lease_token        text,
    lease_expires_at   timestamptz,
    attempt_started_at timestamptz
);
-- Every run is updated twice per attempt (leased, ended): vacuum the table after 2% of it
-- changed (the default waits for 20%), so that the dead index entries leasing leaves at the
-- front of runs_queued are cleared soon.
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.05);
-- Dispatch: the next queued runs of a queue, in lease order.
CREATE INDEX runs_queued ON runs (queue, priority DESC, scheduled_for, id) WHERE status = 'queued';
-- Timers: due promotion and lease rescue.
CREATE INDEX runs_scheduled ON runs (scheduled_for) WHERE status = 'scheduled';
CREATE INDEX runs_lease_expiry ON runs (lease_expires_at) WHERE status = 'running';
-- A worker's running attempts (heartbeat, used capacity, new session).
CREATE INDEX runs_worker ON runs (worker_id) WHERE status = 'running';
-- Queue concurrency limits and depth: running runs by queue.
CREATE INDEX runs_running_queue ON runs (queue) WHERE status = 'running';
-- Lists, newest first. A run's usual life (queued, running, succeeded) touches none of
-- runs_rare_status: lists of queued and running runs are served by runs_queued and
-- runs_lease_expiry or by walking the primary key backwards, like succeeded runs, the bulk
-- of history, which are the newest runs anyway.
CREATE INDEX runs_job ON runs (job_id, id DESC);
CREATE INDEX runs_rare_status ON runs (status, id DESC)
    WHERE status IN ('waiting', 'scheduled', 'failed', 'cancelled', 'skipped');
-- Dedupe: idempotency keys, and one cron run per job and instant (invariant 4).
CREATE UNIQUE INDEX runs_idempotency ON runs (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX runs_cron_instant ON runs (job_id, scheduled_for) WHERE trigger_kind = 'cron';

-- Finished attempts, one row per ended attempt. The running attempt is on its run's row.
CREATE TABLE attempts (
    run_id      text        COLLATE "C" NOT NULL,
    n           integer     NOT NULL,
    worker_id   text        COLLATE "C" NOT NULL,
    status      text        NOT NULL,
    exit_code   integer,
    error       text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, n)
);

-- Output of attempts, in the order the worker read it.
CREATE TABLE log_chunks (
    run_id     text        COLLATE "C" NOT NULL,
    attempt    integer     NOT NULL,
    seq        bigint      NOT NULL,
    stream     text        NOT NULL,
    data       bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, attempt, seq)
);

CREATE TABLE queues (
    name            text        COLLATE "C" NOT NULL PRIMARY KEY,
    priority        integer     NOT NULL DEFAULT 0,
    max_concurrency integer     NOT NULL DEFAULT 0,  -- 0: unlimited
    paused          boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

CREATE TABLE workers (
    id             text             COLLATE "C" NOT NULL PRIMARY KEY,
    session        text             NOT NULL,
    labels         jsonb            NOT NULL,  -- JSON object (null when none)
    cap_cpu        double precision NOT NULL,
    cap_memory_mb  bigint           NOT NULL,
    cap_gpu        integer          NOT NULL,
    cap_slots      integer          NOT NULL,
    state          text             NOT NULL,
    registered_at  timestamptz      NOT NULL,
    last_heartbeat timestamptz      NOT NULL
);

-- Dependencies between runs: run_id waits for upstream_run_id to reach condition.
CREATE TABLE run_deps (
    run_id          text COLLATE "C" NOT NULL,
    upstream_run_id text COLLATE "C" NOT NULL,
    condition       text NOT NULL,  -- succeeded | failed | finished
    PRIMARY KEY (run_id, upstream_run_id)
);
CREATE INDEX run_deps_upstream ON run_deps (upstream_run_id);

-- Pipelines: named DAGs of jobs with an optional schedule (spec is JSON).
CREATE TABLE pipelines (
    id           text        COLLATE "C" NOT NULL PRIMARY KEY,
    namespace    text        COLLATE "C" NOT NULL,
    name         text        COLLATE "C" NOT NULL,
    spec         jsonb       NOT NULL,
    enabled      boolean     NOT NULL,
    next_fire_at timestamptz,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
CREATE UNIQUE INDEX pipelines_namespace_name ON pipelines (namespace, name);
CREATE INDEX pipelines_next_fire ON pipelines (next_fire_at) WHERE next_fire_at IS NOT NULL AND enabled;

-- Leadership of the once-per-cluster loops: one row per role, held until expires_at. (On
-- PostgreSQL an advisory lock can serve instead; the table keeps the schemas alike.)
CREATE TABLE leader_leases (
    name       text        COLLATE "C" NOT NULL PRIMARY KEY,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
