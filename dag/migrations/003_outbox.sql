-- The transactional outbox: every write of the store records its events
-- here in the same transaction; a relay publishes them and marks them.
CREATE TABLE outbox (
    seq          bigserial   PRIMARY KEY,
    id           text        NOT NULL UNIQUE,
    type         text        NOT NULL,
    run_id       text        NOT NULL,
    job_id       text        NOT NULL DEFAULT '',
    attempt      int         NOT NULL DEFAULT 0,
    state        text        NOT NULL,
    reason       text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    published_at timestamptz
);

CREATE INDEX outbox_pending ON outbox (seq) WHERE published_at IS NULL;
