-- Runs, their jobs, and the needs between jobs. A job row holds the
-- compiled spec, so a rebuild uses the pipeline as it was compiled.
CREATE TABLE pipeline_runs (
    id          text        PRIMARY KEY,
    state       text        NOT NULL,
    created_at  timestamptz NOT NULL,
    finished_at timestamptz
);

CREATE TABLE jobs (
    run_id      text        NOT NULL REFERENCES pipeline_runs (id) ON DELETE CASCADE,
    position    int         NOT NULL,
    job_id      text        NOT NULL,
    spec        jsonb       NOT NULL,
    state       text        NOT NULL,
    attempt     int         NOT NULL DEFAULT 1,
    exit_code   int         NOT NULL DEFAULT 0,
    reason      text        NOT NULL DEFAULT '',
    ready_at    timestamptz,
    queued_at   timestamptz,
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (run_id, job_id),
    UNIQUE (run_id, position)
);

CREATE INDEX jobs_active ON jobs (state) WHERE state IN ('ready', 'queued', 'running');

CREATE TABLE job_deps (
    run_id       text NOT NULL,
    job_id       text NOT NULL,
    needs_job_id text NOT NULL,
    PRIMARY KEY (run_id, job_id, needs_job_id),
    FOREIGN KEY (run_id, job_id) REFERENCES jobs (run_id, job_id) ON DELETE CASCADE,
    FOREIGN KEY (run_id, needs_job_id) REFERENCES jobs (run_id, job_id) ON DELETE CASCADE
);
