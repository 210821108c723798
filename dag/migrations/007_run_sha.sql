-- A run records the commit it builds, and its outbox events carry it, so
-- that the statuses of its jobs can be posted on that commit.
ALTER TABLE pipeline_runs ADD COLUMN sha text NOT NULL DEFAULT '';
ALTER TABLE outbox ADD COLUMN sha text NOT NULL DEFAULT '';
