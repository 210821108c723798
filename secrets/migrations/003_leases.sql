-- The leases of dynamic secrets granted to job attempts (their owners),
-- kept until the provider revoked them. The sweeper finds expired ones
-- by expires_at; End finds an attempt's by owner.
CREATE TABLE secrets_leases (
	owner      text        NOT NULL,
	provider   text        NOT NULL,
	lease_id   text        NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (provider, lease_id)
);
CREATE INDEX secrets_leases_expires_at ON secrets_leases (expires_at);
CREATE INDEX secrets_leases_owner ON secrets_leases (owner);
