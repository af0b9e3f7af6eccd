-- Due scheduled runs are leased straight from scheduled (issue 15).
--
-- A lease takes, besides a queue's queued runs, its scheduled runs that are due, earliest
-- first: the promoter no longer writes each run of a burst due at one instant before a
-- worker may lease it. This index finds a queue's due runs in that order.
CREATE INDEX runs_due ON runs (queue, scheduled_for) WHERE status = 'scheduled';
