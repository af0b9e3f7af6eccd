-- Placement by requirements: runs copy their job's requirement labels (a JSON object, NULL
-- when none) next to req_cpu, req_memory_mb and req_gpu.
ALTER TABLE jobs ADD COLUMN req_labels jsonb;
ALTER TABLE runs ADD COLUMN req_labels jsonb;

-- runs_placed: the running runs that book capacity, by worker. A lease sums the ones of the
-- asking worker (and, to find a better fit, of every worker) without walking runs that
-- book nothing, which are the bulk.
CREATE INDEX runs_placed ON runs (worker_id) WHERE status = 'running' AND (req_cpu > 0 OR req_memory_mb > 0 OR req_gpu > 0);
