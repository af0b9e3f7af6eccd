-- Servers and the leadership lease (see the PostgreSQL migration of the same number). One
-- process owns a SQLite data directory, so it always leads; the tables keep the methods
-- alike on both engines.
CREATE TABLE servers (
    id         TEXT    NOT NULL PRIMARY KEY,
    addr       TEXT    NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE leadership (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    term       INTEGER NOT NULL,
    since      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
