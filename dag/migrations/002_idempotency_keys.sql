-- Idempotency keys make run creation idempotent: a webhook delivery or a
-- manual trigger retried returns the run its first attempt created. The
-- key is written first in the creating transaction, so concurrent
-- creations with one key wait for each other and only one run exists.
ALTER TABLE pipeline_runs ADD COLUMN idempotency_key text;

CREATE TABLE idempotency_keys (
    key        text        PRIMARY KEY,
    run_id     text        NOT NULL REFERENCES pipeline_runs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    created_at timestamptz NOT NULL
);
