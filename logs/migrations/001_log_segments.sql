-- One row per step of a finished job attempt's log.
CREATE TABLE log_segments (
    run_id       text        NOT NULL,
    job_id       text        NOT NULL,
    attempt      int         NOT NULL CHECK (attempt >= 1),
    step         int         NOT NULL CHECK (step >= 0),
    start_offset bigint      NOT NULL CHECK (start_offset >= 0),
    bytes        bigint      NOT NULL CHECK (bytes >= 0),
    sha256       text        NOT NULL,
    blob_key     text        NOT NULL,
    complete     boolean     NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (run_id, job_id, attempt, step)
);

-- Retention walks old logs by age.
CREATE INDEX log_segments_created_at ON log_segments (created_at);
