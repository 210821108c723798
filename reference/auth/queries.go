package auth

// The SQL of PostgresStore, on the tables of migrations/001_auth.sql.
const (
	sqlUserCreate = `INSERT INTO auth_users (id, login, name, email, service, created, disabled)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`
	sqlUserCols     = `SELECT id, login, name, email, service, created, disabled FROM auth_users`
	sqlUserGet      = sqlUserCols + ` WHERE id = $1`
	sqlUserByLogin  = sqlUserCols + ` WHERE login = $1`
	sqlUserList     = sqlUserCols + ` ORDER BY login COLLATE "C"`
	sqlUserDisabled = `UPDATE auth_users SET disabled = $2 WHERE id = $1`

	sqlIdentityLink = `INSERT INTO auth_identities (issuer, subject, user_id) VALUES ($1, $2, $3)`
	sqlIdentityUser = `SELECT user_id FROM auth_identities WHERE issuer = $1 AND subject = $2`

	sqlTokenCreate = `INSERT INTO auth_tokens (id, user_id, name, digest, created, expires, max_role, org, repo)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	sqlTokenCols = `SELECT id, user_id, name, digest, created, expires, revoked_at, last_used_at, last_used_from,
		max_role, org, repo FROM auth_tokens`
	sqlTokenGet      = sqlTokenCols + ` WHERE id = $1`
	sqlTokenByDigest = sqlTokenCols + ` WHERE digest = $1`
	sqlTokenList     = sqlTokenCols + ` WHERE $1 = '' OR user_id = $1 ORDER BY seq`
	sqlTokenRevoke   = `UPDATE auth_tokens SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1`
	sqlTokenTouch    = `UPDATE auth_tokens SET last_used_at = $2, last_used_from = $3 WHERE id = $1`

	sqlBindingGrant = `INSERT INTO auth_bindings (login, role, org, repo) VALUES ($1, $2, $3, $4)
		ON CONFLICT DO NOTHING`
	sqlBindingRevoke = `DELETE FROM auth_bindings WHERE login = $1 AND role = $2 AND org = $3 AND repo = $4`
	sqlBindingList   = `SELECT login, role, org, repo FROM auth_bindings WHERE $1 = '' OR login = $1
		ORDER BY login COLLATE "C", org COLLATE "C", repo COLLATE "C", role`

	sqlSessionCreate = `INSERT INTO auth_sessions (digest, user_id, csrf, created, expires, last_seen)
		VALUES ($1, $2, $3, $4, $5, $6)`
	sqlSessionGet    = `SELECT digest, user_id, csrf, created, expires, last_seen FROM auth_sessions WHERE digest = $1`
	sqlSessionTouch  = `UPDATE auth_sessions SET last_seen = $2 WHERE digest = $1`
	sqlSessionDelete = `DELETE FROM auth_sessions WHERE digest = $1`

	sqlAuditAppend = `INSERT INTO auth_audit (time, actor, action, target, detail, remote, outcome)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`
	sqlAuditList = `SELECT id, time, actor, action, target, detail, remote, outcome FROM auth_audit
		WHERE id < $1 AND ($2 = '' OR actor = $2) AND ($3 = '' OR action = $3)
			AND starts_with(target, $4)
		ORDER BY id DESC LIMIT $5`

	// sqlBootstrapLock serialises AdminBootstrap across processes for
	// the transaction (the key is "cikit-auth-bootstrap" as a number).
	sqlBootstrapLock = `SELECT pg_advisory_xact_lock(7399208244127125504)`
	sqlHasAdmin      = `SELECT EXISTS (SELECT 1 FROM auth_bindings WHERE role = $1 AND org = '')`
)
