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
	// The batch forms take their rows as arrays. An insert's rows are
	// sorted by job, so that concurrent batches lock rows in one order.
	sqlInsertMany = `INSERT INTO job_leases (run_id, job_id, attempt, token, runner, expires_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::timestamptz[])
		ON CONFLICT (run_id, job_id) DO UPDATE
			SET attempt = EXCLUDED.attempt, token = EXCLUDED.token, runner = EXCLUDED.runner, expires_at = EXCLUDED.expires_at
			WHERE job_leases.attempt < EXCLUDED.attempt
		RETURNING run_id, job_id`
	// A claim's lease written in the transaction that starts its job
	// replaces any other (see PostgresStore.queueStarts).
	sqlStartMany = `INSERT INTO job_leases (run_id, job_id, attempt, token, runner, expires_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::timestamptz[])
		ON CONFLICT (run_id, job_id) DO UPDATE
			SET attempt = EXCLUDED.attempt, token = EXCLUDED.token, runner = EXCLUDED.runner, expires_at = EXCLUDED.expires_at`
	// A lateral subquery with a LIMIT is one index probe per job: a
	// plain join may hash the whole table.
	sqlGetMany = `SELECT t.i, l.attempt, l.token, l.runner, l.expires_at
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(r, j, i)
		CROSS JOIN LATERAL (SELECT * FROM job_leases WHERE run_id = t.r AND job_id = t.j LIMIT 1) l`
	sqlDeleteMany = `DELETE FROM job_leases l
		USING unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS t(r, j, a, tok)
		WHERE l.run_id = t.r AND l.job_id = t.j AND l.attempt = t.a AND l.token = t.tok`
	// sqlEndHeld is sqlDeleteMany failing the transaction unless it
	// deletes a lease for each of the $5 completions it follows.
	sqlEndHeld = `WITH ended AS (DELETE FROM job_leases l
			USING unnest($1::text[], $2::text[], $3::int[], $4::text[]) AS t(r, j, a, tok)
			WHERE l.run_id = t.r AND l.job_id = t.j AND l.attempt = t.a AND l.token = t.tok
			RETURNING 1)
		SELECT job_leases_held(count(*), $5) FROM ended`
	// errNotHeld is the SQLSTATE of job_leases_held's exception.
	errNotHeld     = "CKL01"
	sqlAsyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`
	sqlExpired     = `SELECT run_id, job_id, attempt, token, runner, expires_at FROM job_leases
		WHERE expires_at <= $1 ORDER BY expires_at, run_id COLLATE "C", job_id COLLATE "C" LIMIT $2`
)
