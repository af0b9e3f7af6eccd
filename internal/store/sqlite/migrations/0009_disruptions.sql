-- Disruptions: the attempts of a run lost to infrastructure (lease expired, worker restarted)
-- that were retried without counting against max_attempts (scheduler.Decide).
ALTER TABLE runs ADD COLUMN disruptions INTEGER NOT NULL DEFAULT 0;
