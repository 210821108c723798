-- Users, their OIDC identities, API tokens, role bindings, web sessions
-- and the audit log of package auth (PostgresStore). Tokens and
-- sessions are kept as the SHA-256 of their secret, never the secret.
CREATE TABLE auth_users (
	id       text        PRIMARY KEY,
	login    text        NOT NULL UNIQUE,
	name     text        NOT NULL DEFAULT '',
	email    text        NOT NULL DEFAULT '',
	service  boolean     NOT NULL DEFAULT false,
	created  timestamptz NOT NULL,
	disabled boolean     NOT NULL DEFAULT false
);

CREATE TABLE auth_identities (
	issuer  text NOT NULL,
	subject text NOT NULL,
	user_id text NOT NULL REFERENCES auth_users (id),
	PRIMARY KEY (issuer, subject)
);

CREATE TABLE auth_tokens (
	id             text        PRIMARY KEY,
	user_id        text        NOT NULL REFERENCES auth_users (id),
	name           text        NOT NULL,
	digest         bytea       NOT NULL UNIQUE,
	created        timestamptz NOT NULL,
	expires        timestamptz,
	revoked_at     timestamptz,
	last_used_at   timestamptz,
	last_used_from text        NOT NULL DEFAULT '',
	max_role       smallint    NOT NULL,
	org            text        NOT NULL DEFAULT '',
	repo           text        NOT NULL DEFAULT '',
	seq            bigserial
);
CREATE INDEX auth_tokens_user ON auth_tokens (user_id, seq);

-- org '' is platform-wide; repo '' every repository of org.
CREATE TABLE auth_bindings (
	login text     NOT NULL,
	role  smallint NOT NULL,
	org   text     NOT NULL,
	repo  text     NOT NULL,
	PRIMARY KEY (login, org, repo, role)
);

CREATE TABLE auth_sessions (
	digest    bytea       PRIMARY KEY,
	user_id   text        NOT NULL REFERENCES auth_users (id),
	csrf      text        NOT NULL,
	created   timestamptz NOT NULL,
	expires   timestamptz NOT NULL,
	last_seen timestamptz NOT NULL
);

CREATE TABLE auth_audit (
	id      bigserial   PRIMARY KEY,
	time    timestamptz NOT NULL,
	actor   text        NOT NULL,
	action  text        NOT NULL,
	target  text        NOT NULL,
	detail  text        NOT NULL DEFAULT '',
	remote  text        NOT NULL DEFAULT '',
	outcome text        NOT NULL
);
CREATE INDEX auth_audit_actor ON auth_audit (actor, id);
