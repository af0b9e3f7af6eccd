-- Running runs: one index by queue and lease expiry instead of one by queue and one by
-- lease expiry (issue 15), as SQLite has had since 0001.
--
-- Every lease writes an entry into each index of running runs; measured in drain, the
-- second index cost the lease statement about 7 µs and 80 bytes of WAL a run. A queue's
-- running runs (concurrency limits, depth) are the index's prefix; the earliest expiry and
-- the expired leases are read queue by queue (every run's queue has a row in queues, and
-- queues are never deleted).
CREATE INDEX runs_running ON runs (queue, lease_expires_at) WHERE status = 'running';
DROP INDEX runs_running_queue;
DROP INDEX runs_lease_expiry;
