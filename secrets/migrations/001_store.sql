-- The built-in secret store (PostgresStore): one row per secret, its value
-- sealed by a Keyring (envelope encryption). scope is the scope's string
-- form ("repo:acme/api"); nothing here is secret without the keyring.
CREATE TABLE secrets_values (
	scope       text        NOT NULL,
	name        text        NOT NULL,
	key_id      text        NOT NULL,
	wrapped_key bytea       NOT NULL,
	ciphertext  bytea       NOT NULL,
	updated_at  timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (scope, name)
);
