package fleet

// The SQL of PostgresRunnerStore.
const (
	sqlRunnerCreate = `INSERT INTO runners (id, name, labels, version, registered_at, last_seen, revoked_at, revoked_by, reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	sqlRunnerColumns = `id, name, labels, version, registered_at, last_seen, revoked_at, revoked_by, reason`
	sqlRunnerGet     = `SELECT ` + sqlRunnerColumns + ` FROM runners WHERE id = $1`
	sqlRunnerSeen    = `UPDATE runners SET last_seen = greatest(last_seen, $2) WHERE id = $1`
	// The first revocation is kept: a second changes nothing.
	sqlRunnerRevoke = `UPDATE runners SET revoked_at = coalesce(revoked_at, $2),
			revoked_by = CASE WHEN revoked_at IS NULL THEN $3 ELSE revoked_by END,
			reason = CASE WHEN revoked_at IS NULL THEN $4 ELSE reason END
		WHERE id = $1
		RETURNING ` + sqlRunnerColumns
	sqlRunnerList = `SELECT ` + sqlRunnerColumns + ` FROM runners WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`
)
