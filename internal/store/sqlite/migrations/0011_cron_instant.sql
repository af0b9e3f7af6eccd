-- A cron run's instant, apart from its due time. scheduled_for is when a run is due, and a
-- retry after a backoff or a manual retry moves it; instant is the cron instant the run was
-- fired for (NULL for runs of any other trigger) and never changes. One cron run per job and
-- instant (invariant 4) is now kept on instant, and a job's fired instants are read from it.
--
-- Cron runs made before this migration take their scheduled_for: that is their instant
-- unless a retry after a backoff moved it before the upgrade, which cannot be undone here.
ALTER TABLE runs ADD COLUMN instant INTEGER;
UPDATE runs SET instant = scheduled_for WHERE trigger_kind = 'cron';
DROP INDEX runs_cron_instant;
CREATE UNIQUE INDEX runs_cron_instant ON runs (job_id, instant) WHERE trigger_kind = 'cron';
