-- Execution leases: at most one per job, of its latest leased attempt.
-- The token fences the runner's calls; expires_at is what the reaper
-- scans. No foreign key to jobs: the lease tables may live beside any
-- dag.Store, and a lease that outlives its run is deleted as stale.
CREATE TABLE job_leases (
    run_id     text        NOT NULL,
    job_id     text        NOT NULL,
    attempt    int         NOT NULL,
    token      text        NOT NULL,
    runner     text        NOT NULL DEFAULT '',
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, job_id)
);

CREATE INDEX job_leases_expires ON job_leases (expires_at, run_id, job_id);
