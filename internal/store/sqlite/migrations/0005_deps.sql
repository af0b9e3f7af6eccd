-- Dependencies: a waiting run counts its unmet dependencies (deps_pending); a run that
-- others wait for is marked (has_dependants), so that ending the bulk of runs, which have
-- none, looks nothing up in run_deps.
ALTER TABLE runs ADD COLUMN deps_pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN has_dependants INTEGER NOT NULL DEFAULT 0;
