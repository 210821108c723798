-- Deliveries: one row per webhook delivery (or manual trigger) taken in,
-- written in the transaction that creates its runs. The primary key stops
-- a redelivery; the semantic key (repository, ref, commit, kind) stops a
-- replayed body under a forged delivery id. Rows are pruned after the
-- providers' redelivery window.
CREATE TABLE webhook_deliveries (
    provider     text        NOT NULL,
    hook_id      text        NOT NULL,
    delivery_id  text        NOT NULL,
    semantic_key text        UNIQUE,
    run_ids      text[]      NOT NULL DEFAULT '{}',
    dropped      text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (provider, hook_id, delivery_id)
);

CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

-- The newest event time seen per ref: an older event is out of order.
CREATE TABLE ref_states (
    ref        text        PRIMARY KEY,
    event_time timestamptz NOT NULL,
    sha        text        NOT NULL
);

-- Heads of pull requests seen: a push of the same commit to a PR's head
-- branch yields to the PR's build.
CREATE TABLE pull_request_heads (
    repo    text        NOT NULL,
    branch  text        NOT NULL,
    sha     text        NOT NULL,
    number  int         NOT NULL,
    seen_at timestamptz NOT NULL,
    PRIMARY KEY (repo, branch, sha)
);
