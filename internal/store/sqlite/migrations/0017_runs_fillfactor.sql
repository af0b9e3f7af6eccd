-- PostgreSQL's migration 0017 leaves room on each page of runs for the versions its
-- updates write. SQLite updates a row in place and has no such setting: nothing changes
-- here. The file keeps both engines' schema versions equal (store.SchemaVersion).
SELECT 1;
