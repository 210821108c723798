-- The unfinished jobs of a run: the fast path asks whether a run has one
-- other than the leaves a batch completes, and whether a batch left a run
-- without any, for every completion of a job nothing needs. Without this
-- index each question walks all of the run's jobs, finished ones first.
CREATE INDEX jobs_unfinished ON jobs (run_id, job_id) WHERE state NOT IN ('succeeded', 'failed', 'skipped', 'cancelled');
