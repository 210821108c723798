-- The jobs waiting for a runner (READY or QUEUED), in the order
-- JobListWaiting pages through them: a sweep that offers them again reads
-- these, not every job of every unfinished run.
CREATE INDEX jobs_waiting ON jobs (run_id COLLATE "C", position) WHERE state IN ('ready', 'queued');
