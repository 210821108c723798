-- The OIDC issuer's signing keys. The private key is sealed with the
-- platform's keyring (aad "oidc-key:" || id). seq orders the keys: the
-- newest unretired one is the primary, which signs.
CREATE TABLE secrets_oidc_keys (
	id          text PRIMARY KEY,
	seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
	keyring_key text NOT NULL,
	wrapped_key bytea NOT NULL,
	ciphertext  bytea NOT NULL,
	created_at  timestamptz NOT NULL,
	retired_at  timestamptz
);

-- The IDs (jti) of the ID tokens the platform has accepted, kept until
-- the tokens expire, so that a replayed token is refused.
CREATE TABLE secrets_token_uses (
	jti        text PRIMARY KEY,
	expires_at timestamptz NOT NULL
);

CREATE INDEX secrets_token_uses_expires ON secrets_token_uses (expires_at);
