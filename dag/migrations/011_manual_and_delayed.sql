-- Manual and delayed jobs. A run whose blocking manual job waits for a
-- person is 'blocked': unfinished, so a newer run supersedes it and
-- RepairActive repairs it, through the index of unfinished runs. A DELAYED
-- job's ready_at is when it becomes READY; JobsRelease finds the jobs due
-- through jobs_delayed.
DROP INDEX pipeline_runs_unfinished;
CREATE INDEX pipeline_runs_unfinished ON pipeline_runs (pipeline, branch) WHERE state IN ('pending', 'running', 'blocked');

CREATE INDEX jobs_delayed ON jobs (ready_at) WHERE state = 'delayed';
