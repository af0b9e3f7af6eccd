-- Concurrency limits (store package doc, "Concurrency limits"): one row per run created
-- under a limit. state is held (the run waits for a slot), active (it holds one) or done
-- (it ended). Counting a key's holders walks (key, 'active'); the transactions of one key
-- are serialized by an advisory lock on the key.
CREATE TABLE run_slots (
    run_id text    COLLATE "C" NOT NULL PRIMARY KEY,
    key    text    COLLATE "C" NOT NULL,
    max    integer NOT NULL,
    policy text    NOT NULL,
    state  text    NOT NULL
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
