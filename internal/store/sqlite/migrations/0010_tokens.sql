-- API tokens (issue 12). The secret is never stored: hash is the lowercase hex SHA-256 of
-- it, looked up on every request (a high-entropy random secret needs no slow hash).
-- namespaces is a JSON array ([] = every namespace); worker_id binds a worker token to the
-- one worker id it may act as ('' = any).
CREATE TABLE tokens (
    id           TEXT    NOT NULL PRIMARY KEY,
    name         TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    namespaces   BLOB    NOT NULL DEFAULT '[]',
    worker_id    TEXT    NOT NULL DEFAULT '',
    hash         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX tokens_hash ON tokens (hash);
