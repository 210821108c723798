-- The runners that registered with the platform: a runner token is good
-- only while its runner is here and not revoked.
CREATE TABLE runners (
	id            text PRIMARY KEY,
	name          text NOT NULL,
	labels        text[] NOT NULL,
	version       text NOT NULL,
	registered_at timestamptz NOT NULL,
	last_seen     timestamptz NOT NULL,
	revoked_at    timestamptz,
	revoked_by    text NOT NULL DEFAULT '',
	reason        text NOT NULL DEFAULT ''
);
