-- Concurrency limits (store package doc, "Concurrency limits"): one row per run created
-- under a limit. state is held (the run waits for a slot), active (it holds one) or done
-- (it ended). Counting a key's holders walks (key, 'active'); the transactions of one key
-- are serialized by an advisory lock on the key.
CREATE TABLE run_slots (
    run_id text    COLLATE "C" NOT NULL PRIMARY KEY,
    key    text    COLLATE "C" NOT NULL,
    max    integer NOT NULL,
    policy text    NOT NULL,
    state  text    NOT NULL,
    -- rate (admissions per per_us microseconds) when the key is rate limited, else 0
    rate   integer NOT NULL DEFAULT 0,
    per_us bigint  NOT NULL DEFAULT 0,
    -- a held run that has its turn under the rate limit reserved: not admitted before it
    release_at timestamptz
);
CREATE INDEX run_slots_key ON run_slots (key, state, run_id);
-- Keys with held runs, for the repair pass at start (Store.AdmitHeld).
CREATE INDEX run_slots_held ON run_slots (key) WHERE state = 'held';

-- Webhook secrets: the key that signs a job's webhook calls (HMAC-SHA256 of the body).
CREATE TABLE job_secrets (
    job_id     text        COLLATE "C" NOT NULL PRIMARY KEY,
    secret     text        NOT NULL,
    created_at timestamptz NOT NULL
);
-- Held runs waiting for their turn under a rate limit, for the release timer.
CREATE INDEX run_slots_release ON run_slots (release_at) WHERE state = 'held' AND release_at IS NOT NULL;

-- A queue's rate limit (0: none): at most rate leases in any window of rate_per_us.
ALTER TABLE queues ADD COLUMN rate integer NOT NULL DEFAULT 0;
ALTER TABLE queues ADD COLUMN rate_per_us bigint NOT NULL DEFAULT 0;

-- Rate limits: each limited key's (or queue's, as "queue:NAME") theoretical arrival time (the generic cell rate
-- algorithm, store.Reserve).
CREATE TABLE rate_limits (
    key text        COLLATE "C" NOT NULL PRIMARY KEY,
    tat timestamptz NOT NULL
);
