-- Servers of a cluster, each heartbeating its row, and the leadership lease: one row per
-- lease name ('leader'), whose holder leads until expires_at (the database's clock). term
-- grows by one each time the lease changes holder; writes only the leader may make carry it
-- (fencing), and the store refuses them when the row has another term or has expired.
CREATE TABLE servers (
    id         text        COLLATE "C" NOT NULL PRIMARY KEY,
    addr       text        NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL
);

CREATE TABLE leadership (
    name       text        COLLATE "C" NOT NULL PRIMARY KEY,
    holder     text        COLLATE "C" NOT NULL,
    term       bigint      NOT NULL,
    since      timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
