-- Pipeline runs: one per trigger of a pipeline; pipeline_run_steps names the run of each of
-- its steps (runs themselves are ordinary runs of the steps' jobs).
CREATE TABLE pipeline_runs (
    id            text        COLLATE "C" NOT NULL PRIMARY KEY,
    pipeline_id   text        COLLATE "C" NOT NULL,
    namespace     text        COLLATE "C" NOT NULL,
    pipeline_name text        COLLATE "C" NOT NULL,
    trigger_kind  text        NOT NULL,
    scheduled_for timestamptz NOT NULL,
    args          jsonb,
    created_at    timestamptz NOT NULL
);
CREATE INDEX pipeline_runs_pipeline ON pipeline_runs (pipeline_id, id);
-- A pipeline fires once per cron instant, whatever servers overlap.
CREATE UNIQUE INDEX pipeline_runs_cron ON pipeline_runs (pipeline_id, scheduled_for) WHERE trigger_kind = 'cron';

CREATE TABLE pipeline_run_steps (
    pipeline_run_id text COLLATE "C" NOT NULL,
    step            text COLLATE "C" NOT NULL,
    run_id          text COLLATE "C" NOT NULL,
    PRIMARY KEY (pipeline_run_id, step)
);
CREATE INDEX pipeline_run_steps_run ON pipeline_run_steps (run_id);
