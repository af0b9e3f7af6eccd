-- Worker sessions live in the store (issue 11): what a server needs to serve a worker that
-- registered with another server. handlers is a JSON array of handler kinds; commands says
-- the worker runs command and shell jobs.
ALTER TABLE workers ADD COLUMN handlers BLOB    NOT NULL DEFAULT '[]';
ALTER TABLE workers ADD COLUMN commands INTEGER NOT NULL DEFAULT 0;
