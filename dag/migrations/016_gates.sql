-- Approval gates. A gated job waiting MANUAL records in ready_at when it
-- began to wait; JobsExpire finds the gated jobs through jobs_gated to
-- fail those nobody approved in time, and a new run of a pipeline and
-- branch finds the older runs' waiting gates through it to cancel them.
CREATE INDEX jobs_gated ON jobs (run_id) WHERE state = 'manual' AND spec ? 'gate';
