-- PostgreSQL's migration 0018 compresses big audit entries with lz4. SQLite stores them
-- as they are: nothing changes here. The file keeps both engines' schema versions equal
-- (store.SchemaVersion).
SELECT 1;
