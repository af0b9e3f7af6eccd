-- runs_rare_status, with its WHERE written as a chain of ORs instead of an IN list.
--
-- SQLite evaluates a partial index's WHERE for every row it inserts or updates, and an IN
-- list of more than two values is evaluated by building an ephemeral table, twice per
-- updated row (old and new values): a tenth of the cost of leasing or completing a run.
-- A chain of equalities is plain comparisons. A query that repeats the chain, or names one
-- of the states with status = '...', can use the index as before.
DROP INDEX runs_rare_status;
CREATE INDEX runs_rare_status ON runs (status, id)
    WHERE status = 'waiting' OR status = 'scheduled' OR status = 'failed' OR status = 'cancelled' OR status = 'skipped';
