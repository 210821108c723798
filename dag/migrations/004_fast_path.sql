-- The fast path and attempt history. A job's allow_failure is kept beside
-- its state, so a conditional update can tell whether a job's needs are
-- satisfied without reading specs; children are found by the job they
-- need. Every ended attempt of a job is kept in job_attempts.
ALTER TABLE jobs ADD COLUMN allow_failure boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN runner text NOT NULL DEFAULT '';

CREATE INDEX job_deps_needs ON job_deps (run_id, needs_job_id);

CREATE TABLE job_attempts (
    run_id      text        NOT NULL,
    job_id      text        NOT NULL,
    attempt     int         NOT NULL,
    state       text        NOT NULL,
    exit_code   int         NOT NULL,
    reason      text        NOT NULL,
    runner      text        NOT NULL,
    ready_at    timestamptz,
    queued_at   timestamptz,
    started_at  timestamptz,
    finished_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, job_id, attempt),
    FOREIGN KEY (run_id, job_id) REFERENCES jobs (run_id, job_id) ON DELETE CASCADE
);
