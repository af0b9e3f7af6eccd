-- Retention (issue 13): finished runs by age. finished_at is set exactly when a run is final
-- (a retry clears it), so this index lists the history oldest first for the retention
-- service, which deletes the runs finished before a cutoff in small batches.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
