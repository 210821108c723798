package lease

// The SQL of PostgresStore.
const (
	// A lease of an earlier attempt is the leftover of an attempt that
	// ended; it is replaced. One of this attempt or a later one wins.
	sqlInsert = `INSERT INTO job_leases (run_id, job_id, attempt, token, runner, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (run_id, job_id) DO UPDATE
			SET attempt = EXCLUDED.attempt, token = EXCLUDED.token, runner = EXCLUDED.runner, expires_at = EXCLUDED.expires_at
			WHERE job_leases.attempt < EXCLUDED.attempt`
	sqlRenew = `UPDATE job_leases SET expires_at = $5
		WHERE run_id = $1 AND job_id = $2 AND attempt = $3 AND token = $4`
	sqlGet = `SELECT attempt, token, runner, expires_at FROM job_leases
		WHERE run_id = $1 AND job_id = $2`
	sqlDelete = `DELETE FROM job_leases
		WHERE run_id = $1 AND job_id = $2 AND attempt = $3 AND token = $4`
	sqlExpired = `SELECT run_id, job_id, attempt, token, runner, expires_at FROM job_leases
		WHERE expires_at <= $1 ORDER BY expires_at, run_id COLLATE "C", job_id COLLATE "C" LIMIT $2`
)
