-- A cron run's instant gets a column of its own, set when the run is created and never
-- changed. scheduled_for is when a run is due, and a retry moves it: the uniqueness of
-- (job, instant) on scheduled_for (runs_cron_instant) then lost a retried run's instant (a
-- second run could be created for it) and caught retried runs instead (two cron runs of one
-- job retried at one instant, as one rescue pass does, failed the transaction every time).
-- runs_cron_instant goes with this migration: this database has one process, whose new
-- binary uses runs_cron_at alone.
ALTER TABLE runs ADD COLUMN cron_at INTEGER;
UPDATE runs SET cron_at = scheduled_for WHERE trigger_kind = 'cron';
CREATE UNIQUE INDEX runs_cron_at ON runs (job_id, cron_at) WHERE trigger_kind = 'cron';
DROP INDEX runs_cron_instant;
