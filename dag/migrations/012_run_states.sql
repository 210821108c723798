-- A run's jobs by state: the locked path tells a run's state after a
-- write from one probe per kind of state (see runProbe) instead of reading
-- every job of the run.
CREATE INDEX jobs_run_state ON jobs (run_id, state);

-- The jobs waiting for a runner by the time they became ready: the expiry
-- sweep finds those past the max queue time without reading the others.
CREATE INDEX jobs_waiting_since ON jobs (ready_at) WHERE state IN ('ready', 'queued');
