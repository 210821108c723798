package artifacts

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations, numbered SQL files
// applied in order by PostgresManifest.Migrate and
// PostgresCacheIndex.Migrate: the tables artifact_uploads, artifacts and
// cache_entries.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// migrate applies the package's migrations the database does not have
// yet.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.Apply(ctx, pool, "artifacts", Migrations())
}

// PostgresManifest is a Manifest in PostgreSQL's artifact_uploads and
// artifacts tables.
type PostgresManifest struct {
	pool *pgxpool.Pool
}

var _ Manifest = (*PostgresManifest)(nil)

// NewPostgresManifest returns a manifest over pool.
func NewPostgresManifest(pool *pgxpool.Pool) (*PostgresManifest, error) {
	if pool == nil {
		return nil, errors.New("artifacts: NewPostgresManifest needs a pool")
	}
	return &PostgresManifest{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet.
func (m *PostgresManifest) Migrate(ctx context.Context) error {
	return migrate(ctx, m.pool)
}

const (
	uploadColumns = `id, repo, run_id, job_id, attempt, cache, name, type, report, size, sha256, files,
		expire_in_ns, overwrite, scope, blob_key, multipart_id, stored, created_at, expires_at, aborted`
	insertUpload = `INSERT INTO artifact_uploads (` + uploadColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`
	queryUpload    = `SELECT ` + uploadColumns + ` FROM artifact_uploads WHERE id = $1`
	deleteUpload   = `DELETE FROM artifact_uploads WHERE id = $1`
	finishUpload   = `DELETE FROM artifact_uploads WHERE id = $1 AND NOT aborted`
	abortUpload    = `UPDATE artifact_uploads SET aborted = true WHERE id = $1 AND NOT aborted`
	queryUploadsBy = `SELECT ` + uploadColumns + ` FROM artifact_uploads WHERE expires_at < $1 ORDER BY expires_at, id LIMIT $2`

	artifactColumns = `id, repo, default_branch, run_id, job_id, attempt, name, type, report, size, sha256, files,
		blob_key, created_at, expires_at`
	insertArtifact = `INSERT INTO artifacts (` + artifactColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`
	// Two finishes of one name in one run serialize here, so the second
	// sees the first's artifact.
	lockArtifactName = `SELECT pg_advisory_xact_lock(hashtext('artifacts'), hashtext($1 || '/' || $2))`
	deleteNamed      = `DELETE FROM artifacts WHERE run_id = $1 AND name = $2 RETURNING ` + artifactColumns
	queryNamed       = `SELECT EXISTS (SELECT 1 FROM artifacts WHERE run_id = $1 AND name = $2)`
	queryArtifacts   = `SELECT ` + artifactColumns + ` FROM artifacts
		WHERE run_id = $1 AND (cardinality($2::text[]) = 0 OR job_id = ANY ($2))
		AND ($3 <= 0 OR attempt = $3) AND ($4 = '' OR name = $4) AND ($5 = '' OR type = $5)
		ORDER BY job_id, attempt, name`
	// latest is each repository's latest default-branch run: the run of
	// its default-branch artifact created last, of two created at once
	// the run whose ID sorts last.
	queryExpired = `WITH latest AS (
			SELECT DISTINCT ON (repo) repo, run_id FROM artifacts
			WHERE $3 AND default_branch ORDER BY repo, created_at DESC, run_id DESC
		)
		SELECT ` + artifactColumns + ` FROM artifacts a
		WHERE expires_at IS NOT NULL AND expires_at < $1
		AND NOT EXISTS (SELECT 1 FROM latest l WHERE l.repo = a.repo AND l.run_id = a.run_id)
		ORDER BY expires_at, id LIMIT $2`
	deleteArtifacts = `DELETE FROM artifacts WHERE id = ANY ($1) RETURNING id`
)

// UploadCreate implements Manifest. An ID already in progress is
// cikit.ErrConflict.
func (m *PostgresManifest) UploadCreate(ctx context.Context, u *PendingUpload) error {
	if err := checkUpload(u); err != nil {
		return err
	}
	_, err := m.pool.Exec(ctx, insertUpload, u.ID, u.Repo, u.RunID, u.JobID, u.Attempt, u.Cache, u.Name, u.Type, u.Report,
		u.Size, u.SHA256, u.Files, int64(u.ExpireIn), u.Overwrite, u.Scope, u.BlobKey, u.MultipartID, u.Stored,
		storedTime(u.CreatedAt), storedTime(u.ExpiresAt), u.Aborted)
	return interpretError(err)
}

// UploadGet implements Manifest.
func (m *PostgresManifest) UploadGet(ctx context.Context, id string) (*PendingUpload, error) {
	rows, err := m.pool.Query(ctx, queryUpload, id)
	if err != nil {
		return nil, interpretError(err)
	}
	u, err := pgx.CollectExactlyOneRow(rows, scanUpload)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("artifacts: upload %q: %w", id, cikit.ErrNotFound)
	}
	if err != nil {
		return nil, interpretError(err)
	}
	return &u, nil
}

// UploadFinish implements Manifest.
func (m *PostgresManifest) UploadFinish(ctx context.Context, id string, a *Artifact, replace bool) (*Artifact, error) {
	var replaced *Artifact
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var err error
		replaced, err = m.UploadFinishTx(ctx, tx, id, a, replace)
		return err
	})
	if err != nil {
		return nil, err
	}
	return replaced, nil
}

// UploadFinishTx is UploadFinish in the caller's transaction: the upload
// ends and the artifact is listed when tx commits.
func (m *PostgresManifest) UploadFinishTx(ctx context.Context, tx pgx.Tx, id string, a *Artifact, replace bool) (*Artifact, error) {
	if err := checkArtifact(a); err != nil {
		return nil, err
	}
	// Of two finishes of one upload, the second waits here for the
	// first's row lock and then deletes nothing; an aborted upload is
	// not finished.
	tag, err := tx.Exec(ctx, finishUpload, id)
	if err != nil {
		return nil, interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("artifacts: upload %q is not in progress: %w", id, cikit.ErrNotFound)
	}
	if _, err := tx.Exec(ctx, lockArtifactName, a.RunID, a.Name); err != nil {
		return nil, interpretError(err)
	}
	var replaced *Artifact
	if replace {
		rows, err := tx.Query(ctx, deleteNamed, a.RunID, a.Name)
		if err != nil {
			return nil, interpretError(err)
		}
		old, err := pgx.CollectRows(rows, scanArtifact)
		if err != nil {
			return nil, interpretError(err)
		}
		if len(old) > 0 {
			replaced = &old[0]
		}
	} else {
		var named bool
		if err := tx.QueryRow(ctx, queryNamed, a.RunID, a.Name).Scan(&named); err != nil {
			return nil, interpretError(err)
		}
		if named {
			return nil, fmt.Errorf("artifacts: run %s has an artifact named %q: %w", a.RunID, a.Name, ErrRefused)
		}
	}
	s := storedArtifact(*a)
	_, err = tx.Exec(ctx, insertArtifact, s.ID, s.Repo, s.DefaultBranch, s.RunID, s.JobID, s.Attempt, s.Name, s.Type, s.Report,
		s.Size, s.SHA256, s.Files, s.BlobKey, s.CreatedAt, nullTime(s.ExpiresAt))
	if err != nil {
		return nil, interpretError(err)
	}
	return replaced, nil
}

// UploadDelete implements Manifest.
func (m *PostgresManifest) UploadDelete(ctx context.Context, id string) (bool, error) {
	tag, err := m.pool.Exec(ctx, deleteUpload, id)
	if err != nil {
		return false, interpretError(err)
	}
	return tag.RowsAffected() > 0, nil
}

// UploadAbort implements Manifest.
func (m *PostgresManifest) UploadAbort(ctx context.Context, id string) (bool, error) {
	tag, err := m.pool.Exec(ctx, abortUpload, id)
	if err != nil {
		return false, interpretError(err)
	}
	return tag.RowsAffected() > 0, nil
}

// UploadsExpired implements Manifest.
func (m *PostgresManifest) UploadsExpired(ctx context.Context, t time.Time, limit int) ([]PendingUpload, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	rows, err := m.pool.Query(ctx, queryUploadsBy, t, limit)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, scanUpload)
	return out, interpretError(err)
}

// ArtifactsList implements Manifest.
func (m *PostgresManifest) ArtifactsList(ctx context.Context, f ArtifactFilter) ([]Artifact, error) {
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	jobs := f.JobIDs
	if jobs == nil {
		jobs = []string{}
	}
	rows, err := m.pool.Query(ctx, queryArtifacts, f.RunID, jobs, f.Attempt, f.Name, f.Type)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, scanArtifact)
	return out, interpretError(err)
}

// ArtifactsExpired implements Manifest. The latest run of a repository's
// default branch is the run of its default-branch artifact created last;
// of two created at once, the run whose ID sorts last.
func (m *PostgresManifest) ArtifactsExpired(ctx context.Context, t time.Time, limit int, keepLatestDefault bool) ([]Artifact, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	rows, err := m.pool.Query(ctx, queryExpired, t, limit, keepLatestDefault)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, scanArtifact)
	return out, interpretError(err)
}

// ArtifactsDelete implements Manifest.
func (m *PostgresManifest) ArtifactsDelete(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, ctx.Err()
	}
	rows, err := m.pool.Query(ctx, deleteArtifacts, ids)
	if err != nil {
		return nil, interpretError(err)
	}
	deleted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return deleted, interpretError(err)
}

func scanUpload(row pgx.CollectableRow) (PendingUpload, error) {
	var u PendingUpload
	var expireIn int64
	err := row.Scan(&u.ID, &u.Repo, &u.RunID, &u.JobID, &u.Attempt, &u.Cache, &u.Name, &u.Type, &u.Report, &u.Size,
		&u.SHA256, &u.Files, &expireIn, &u.Overwrite, &u.Scope, &u.BlobKey, &u.MultipartID, &u.Stored,
		&u.CreatedAt, &u.ExpiresAt, &u.Aborted)
	u.ExpireIn = time.Duration(expireIn)
	u.CreatedAt = u.CreatedAt.UTC()
	u.ExpiresAt = u.ExpiresAt.UTC()
	return u, err
}

func scanArtifact(row pgx.CollectableRow) (Artifact, error) {
	var a Artifact
	var expires *time.Time
	err := row.Scan(&a.ID, &a.Repo, &a.DefaultBranch, &a.RunID, &a.JobID, &a.Attempt, &a.Name, &a.Type, &a.Report,
		&a.Size, &a.SHA256, &a.Files, &a.BlobKey, &a.CreatedAt, &expires)
	a.CreatedAt = a.CreatedAt.UTC()
	if expires != nil {
		a.ExpiresAt = expires.UTC()
	}
	return a, err
}

// nullTime is t for a nullable column: NULL when zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// interpretError turns PostgreSQL's errors into the package's.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" { // unique_violation
		return fmt.Errorf("artifacts: %w: %s", cikit.ErrConflict, pgErr.Message)
	}
	return fmt.Errorf("artifacts: %w", err)
}
