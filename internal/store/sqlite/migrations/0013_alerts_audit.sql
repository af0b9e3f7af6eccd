-- Alerts and the audit log (issue 13).
--
-- alerts: one row per alert, firing until it resolves; at most one firing per (rule,
-- subject). clear_since is when a firing alert's condition was last seen clear (it
-- resolves after the hysteresis).
CREATE TABLE alerts (
    id          TEXT    NOT NULL PRIMARY KEY,
    rule        TEXT    NOT NULL,
    subject     TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    summary     TEXT    NOT NULL,
    link        TEXT    NOT NULL DEFAULT '',
    started_at  INTEGER NOT NULL,
    resolved_at INTEGER,
    clear_since INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX alerts_firing ON alerts (rule, subject) WHERE state = 'firing';

-- audit_log: every change made through the API; before and after are the object as the
-- API shows it (JSON, secrets masked), NULL when there is none. Only target is indexed: a
-- list by actor walks the log by id (an index more would cost every change a write more).
CREATE TABLE audit_log (
    id     TEXT    NOT NULL PRIMARY KEY,
    at     INTEGER NOT NULL,
    actor  TEXT    NOT NULL,
    role   TEXT    NOT NULL,
    action TEXT    NOT NULL,
    target TEXT    NOT NULL,
    before BLOB,
    after  BLOB
) WITHOUT ROWID;
CREATE INDEX audit_log_target ON audit_log (target, id);

-- A queue's own alert thresholds (JSON of model.QueueAlerts; NULL: the server's).
ALTER TABLE queues ADD COLUMN alerts BLOB;

-- The alert service reads the jobs whose runs failed since its last pass. The predicate on
-- finished_at keeps the lists of failed runs (status = 'failed' only, by id) on
-- runs_rare_status: only a query bounding finished_at can use this index.
CREATE INDEX runs_failed_at ON runs (finished_at) WHERE status = 'failed' AND finished_at IS NOT NULL;
