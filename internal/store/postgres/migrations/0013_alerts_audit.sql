-- Alerts and the audit log (issue 13).
--
-- alerts: one row per alert, firing until it resolves; at most one firing per (rule,
-- subject). clear_since is when a firing alert's condition was last seen clear (it
-- resolves after the hysteresis).
CREATE TABLE alerts (
    id          text        COLLATE "C" NOT NULL PRIMARY KEY,
    rule        text        NOT NULL,
    subject     text        NOT NULL,
    state       text        NOT NULL,
    summary     text        NOT NULL,
    link        text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL,
    resolved_at timestamptz,
    clear_since timestamptz
);
CREATE UNIQUE INDEX alerts_firing ON alerts (rule, subject) WHERE state = 'firing';

-- audit_log: every change made through the API; before and after are the object as the
-- API shows it (JSON, secrets masked), NULL when there is none. Only target is indexed: a
-- list by actor walks the log by id (an index more would cost every change a write more).
CREATE TABLE audit_log (
    id     text        COLLATE "C" NOT NULL PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text        NOT NULL,
    role   text        NOT NULL,
    action text        NOT NULL,
    target text        NOT NULL,
    before jsonb,
    after  jsonb
);
CREATE INDEX audit_log_target ON audit_log (target, id);

-- A queue's own alert thresholds (JSON of model.QueueAlerts; NULL: the server's).
ALTER TABLE queues ADD COLUMN alerts jsonb;

-- The alert service reads the jobs whose runs failed since its last pass. The predicate on
-- finished_at keeps the lists of failed runs (status = 'failed' only, by id) on
-- runs_rare_status: only a query bounding finished_at can use this index.
CREATE INDEX runs_failed_at ON runs (finished_at) WHERE status = 'failed' AND finished_at IS NOT NULL;
