-- Superseding: a run records the pipeline it executes and the branch it
-- builds, and a new run cancels the unfinished runs of its pipeline and
-- branch, which this index finds.
ALTER TABLE pipeline_runs
    ADD COLUMN pipeline text NOT NULL DEFAULT '',
    ADD COLUMN branch   text NOT NULL DEFAULT '';

CREATE INDEX pipeline_runs_unfinished ON pipeline_runs (pipeline, branch) WHERE state IN ('pending', 'running');

-- Concurrency groups: the READY and active jobs of a group, by the group
-- their spec names (the group's branch is their run's).
CREATE INDEX jobs_group ON jobs ((spec->'concurrency'->>'group'))
    WHERE state IN ('ready', 'queued', 'running', 'cancel_requested');

-- One row per group and branch, created on first use: queueing a job of
-- a group locks its row, so the group's decisions are taken one at a
-- time.
CREATE TABLE concurrency_groups (
    name   text NOT NULL,
    branch text NOT NULL,
    PRIMARY KEY (name, branch)
);
