-- Pipeline runs: one per trigger of a pipeline; pipeline_run_steps names the run of each of
-- its steps (runs themselves are ordinary runs of the steps' jobs).
CREATE TABLE pipeline_runs (
    id            TEXT    NOT NULL PRIMARY KEY,
    pipeline_id   TEXT    NOT NULL,
    namespace     TEXT    NOT NULL,
    pipeline_name TEXT    NOT NULL,
    trigger_kind  TEXT    NOT NULL,
    scheduled_for INTEGER NOT NULL,
    args          BLOB,
    created_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX pipeline_runs_pipeline ON pipeline_runs (pipeline_id, id);
-- A pipeline fires once per cron instant, whatever servers overlap.
CREATE UNIQUE INDEX pipeline_runs_cron ON pipeline_runs (pipeline_id, scheduled_for) WHERE trigger_kind = 'cron';

CREATE TABLE pipeline_run_steps (
    pipeline_run_id TEXT NOT NULL,
    step            TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    PRIMARY KEY (pipeline_run_id, step)
) WITHOUT ROWID;
CREATE INDEX pipeline_run_steps_run ON pipeline_run_steps (run_id);
