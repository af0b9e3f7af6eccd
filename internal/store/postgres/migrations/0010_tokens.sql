-- API tokens (issue 12). The secret is never stored: hash is the lowercase hex SHA-256 of
-- it, looked up on every request (a high-entropy random secret needs no slow hash).
-- namespaces is empty for every namespace; worker_id binds a worker token to the one worker
-- id it may act as ('' = any).
CREATE TABLE tokens (
    id           text        COLLATE "C" NOT NULL PRIMARY KEY,
    name         text        NOT NULL,
    role         text        NOT NULL,
    namespaces   text[]      NOT NULL DEFAULT '{}',
    worker_id    text        NOT NULL DEFAULT '',
    hash         text        COLLATE "C" NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE UNIQUE INDEX tokens_hash ON tokens (hash);
