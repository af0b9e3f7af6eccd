-- PostgreSQL's migration 0016 merges its two indexes of running runs into runs_running
-- (queue, lease_expires_at), which this engine has had since 0001: nothing changes here.
-- The file keeps both engines' schema versions equal (store.SchemaVersion).
SELECT 1;
