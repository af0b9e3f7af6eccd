-- One-off jobs stored as their run alone (issue 15).
--
-- A one-off job whose definition adds nothing to its first run (store.Anonymous: unnamed,
-- no schedule, key, concurrency policy, DAG or alert thresholds) gets no jobs row: its run
-- keeps the job's spec here, and the job is read back from the run. spec is NULL on every
-- other run: those read their job's row. A change to such a job (update, delete, trigger,
-- webhook secret) first writes its jobs row and sets spec back to NULL. The column is the
-- table's last, so that the updates of a lease and of an end, which leave it alone, log it
-- as an unchanged suffix. Adding a nullable column rewrites nothing.
ALTER TABLE runs ADD COLUMN spec jsonb;
