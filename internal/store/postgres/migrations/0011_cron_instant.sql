-- A cron run's instant, apart from its due time. scheduled_for is when a run is due, and a
-- retry after a backoff or a manual retry moves it; instant is the cron instant the run was
-- fired for (NULL for runs of any other trigger) and never changes. One cron run per job and
-- instant (invariant 4) is now kept on the instant, and a job's fired instants are read from
-- it.
--
-- Cron runs made before this migration take their scheduled_for: that is their instant
-- unless a retry after a backoff moved it before the upgrade, which cannot be undone here.
--
-- The release before this one must keep working on this schema during a rolling upgrade
-- (docs/operations.md), and its servers write cron runs without an instant. So the key is
-- coalesce(instant, scheduled_for): a run they write is keyed by its scheduled_for, its
-- instant when it is made, and both releases dedupe against each other on one index. A later
-- migration, once no server of that release is left, can fill the instants they left empty
-- and key on instant alone.
ALTER TABLE runs ADD COLUMN instant timestamptz;
UPDATE runs SET instant = scheduled_for WHERE trigger_kind = 'cron';
DROP INDEX runs_cron_instant;
CREATE UNIQUE INDEX runs_cron_instant ON runs (job_id, (coalesce(instant, scheduled_for))) WHERE trigger_kind = 'cron';
