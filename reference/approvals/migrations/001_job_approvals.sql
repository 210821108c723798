-- One row per decision on an attempt of a gated job.
CREATE TABLE job_approvals (
    run_id     text        NOT NULL,
    job_id     text        NOT NULL,
    attempt    int         NOT NULL CHECK (attempt >= 1),
    login      text        NOT NULL,
    decision   text        NOT NULL CHECK (decision IN ('approve', 'reject')),
    comment    text        NOT NULL,
    decided_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, job_id, attempt)
);
