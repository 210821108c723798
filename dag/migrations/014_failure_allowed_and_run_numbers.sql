-- A failure limited to exit codes (allow_failure:exit_codes) is allowed
-- or not by how each attempt failed: jobs.allow_failure holds the current
-- attempt's answer (the spec's until it fails), and job_attempts keeps
-- each ended attempt's. Attempts recorded before this migration take
-- their job's.
ALTER TABLE job_attempts ADD COLUMN allow_failure boolean NOT NULL DEFAULT false;
UPDATE job_attempts a SET allow_failure = j.allow_failure
	FROM jobs j WHERE j.run_id = a.run_id AND j.job_id = a.job_id AND j.allow_failure;

-- Run numbers: 1, 2, 3 … per pipeline, in creation order. A pipeline's
-- counter is upserted in the transaction that creates its run. Runs
-- created before this migration are numbered in the order they were.
ALTER TABLE pipeline_runs ADD COLUMN number bigint NOT NULL DEFAULT 0;
UPDATE pipeline_runs p SET number = n.number
	FROM (SELECT id, row_number() OVER (PARTITION BY pipeline ORDER BY created_at, id COLLATE "C") AS number
		FROM pipeline_runs) n
	WHERE n.id = p.id;
CREATE TABLE pipeline_run_numbers (
	pipeline text PRIMARY KEY,
	last bigint NOT NULL
);
INSERT INTO pipeline_run_numbers (pipeline, last)
	SELECT pipeline, max(number) FROM pipeline_runs GROUP BY pipeline;
