-- A cron run's instant gets a column of its own, set when the run is created and never
-- changed. scheduled_for is when a run is due, and a retry moves it: the uniqueness of
-- (job, instant) on scheduled_for (runs_cron_instant) then lost a retried run's instant (a
-- second run could be created for it) and caught retried runs instead (two cron runs of one
-- job retried at one instant, as one rescue pass does, failed the transaction every time).
--
-- A trigger sets cron_at on every new cron run, so that a server of the previous release,
-- which inserts runs without it during a rolling upgrade, is held to runs_cron_at too (its
-- inserts skip a taken instant with ON CONFLICT DO NOTHING, whatever the index). That is
-- also why runs_cron_instant can go now: no release needs it, and keeping it would keep
-- failing the retries.
ALTER TABLE runs ADD COLUMN cron_at timestamptz;
UPDATE runs SET cron_at = scheduled_for WHERE trigger_kind = 'cron';
CREATE FUNCTION runs_set_cron_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.cron_at := NEW.scheduled_for;
	RETURN NEW;
END
$$;
CREATE TRIGGER runs_cron_at BEFORE INSERT ON runs
	FOR EACH ROW WHEN (NEW.trigger_kind = 'cron' AND NEW.cron_at IS NULL) EXECUTE FUNCTION runs_set_cron_at();
CREATE UNIQUE INDEX runs_cron_at ON runs (job_id, cron_at) WHERE trigger_kind = 'cron';
DROP INDEX runs_cron_instant;
