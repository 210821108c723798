-- What a run knows of the event that started it (cikit.RunContext), and
-- what an executor reported with a job's completion beyond its outcome
-- (dag.JobResult): outputs, annotations, the commit checked out. NULL
-- when not given. The context is json, not jsonb: it keeps the event's
-- payload byte for byte as the forge sent it, and holds the \u0000
-- escapes that jsonb refuses.
ALTER TABLE pipeline_runs ADD COLUMN context json;
ALTER TABLE jobs ADD COLUMN result jsonb;
ALTER TABLE job_attempts ADD COLUMN result jsonb;
