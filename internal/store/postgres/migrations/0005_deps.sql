-- Dependencies: a waiting run counts its unmet dependencies (deps_pending); a run that
-- others wait for is marked (has_dependants), so that ending the bulk of runs, which have
-- none, looks nothing up in run_deps.
ALTER TABLE runs ADD COLUMN deps_pending integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN has_dependants boolean NOT NULL DEFAULT false;

-- dep_outbox: runs that ended with dependants in a statement of their own (the completion
-- of successes, one statement without a transaction around it). The same statement records
-- them here, so their dependants are resolved right after, or, after a crash in between,
-- by the next ResolvePending.
CREATE TABLE dep_outbox (
    run_id text COLLATE "C" NOT NULL PRIMARY KEY
);
