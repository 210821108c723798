package artifacts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresCacheIndex is a CacheIndex in PostgreSQL's cache_entries table.
type PostgresCacheIndex struct {
	pool *pgxpool.Pool
}

var _ CacheIndex = (*PostgresCacheIndex)(nil)

// NewPostgresCacheIndex returns an index over pool.
func NewPostgresCacheIndex(pool *pgxpool.Pool) (*PostgresCacheIndex, error) {
	if pool == nil {
		return nil, errors.New("artifacts: NewPostgresCacheIndex needs a pool")
	}
	return &PostgresCacheIndex{pool: pool}, nil
}

// Migrate applies the migrations the database does not have yet.
func (c *PostgresCacheIndex) Migrate(ctx context.Context) error {
	return migrate(ctx, c.pool)
}

const (
	entryColumns = `repo, scope, key, sha256, size, blob_key, created_at, last_hit_at, upload_id`
	// hitEntry marks the entry the CTE hit chose as used and returns it.
	// An entry evicted meanwhile updates nothing: a miss.
	hitEntry = ` UPDATE cache_entries e SET last_hit_at = $2 FROM hit
		WHERE e.repo = $1 AND e.scope = hit.scope AND e.key = hit.key
		RETURNING e.repo, e.scope, e.key, e.sha256, e.size, e.blob_key, e.created_at, e.last_hit_at, e.upload_id`
	// lookupExact: the first key ($3, in order) in the first scope ($4,
	// in order) that holds it. LATERAL keeps each probe a primary-key
	// lookup, where a join may scan the table.
	lookupExact = `WITH hit AS (
			SELECT e.scope, e.key
			FROM unnest($3::text[]) WITH ORDINALITY k(key, ki)
			CROSS JOIN unnest($4::text[]) WITH ORDINALITY s(scope, si)
			CROSS JOIN LATERAL (
				SELECT e.scope, e.key FROM cache_entries e WHERE e.repo = $1 AND e.scope = s.scope AND e.key = k.key
			) e
			ORDER BY k.ki, s.si LIMIT 1
		)` + hitEntry
	// lookupPrefix: of the prefixes $3 (each the key range [$3[i],
	// $4[i])), the longest that any entry of the scopes $5 matches (an
	// index probe per prefix), then the first scope with a match, then
	// its most recently created match (a range scan of the primary key).
	lookupPrefix = `WITH best AS (
			SELECT p.prefix, p.prefix_end
			FROM unnest($3::text[], $4::text[]) WITH ORDINALITY p(prefix, prefix_end, pi)
			WHERE EXISTS (
				SELECT 1 FROM cache_entries e
				WHERE e.repo = $1 AND e.scope = ANY ($5::text[]) AND e.key >= p.prefix AND e.key < p.prefix_end
			)
			ORDER BY octet_length(p.prefix) DESC, p.pi LIMIT 1
		), hit AS (
			SELECT e.scope, e.key
			FROM best
			CROSS JOIN unnest($5::text[]) WITH ORDINALITY s(scope, si)
			CROSS JOIN LATERAL (
				SELECT e.scope, e.key FROM cache_entries e
				WHERE e.repo = $1 AND e.scope = s.scope AND e.key >= best.prefix AND e.key < best.prefix_end
				ORDER BY e.created_at DESC, e.key LIMIT 1
			) e
			ORDER BY s.si LIMIT 1
		)` + hitEntry
	insertEntry = `INSERT INTO cache_entries (` + entryColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT DO NOTHING`
	queryDigest = `SELECT EXISTS (SELECT 1 FROM cache_entries WHERE repo = $1 AND scope = $2 AND sha256 = $3)`
	// Evictions serialize here, so that two do not count one repository's
	// bytes at once.
	lockEvict = `SELECT pg_advisory_xact_lock(hashtext('cache_entries'), 0)`
	evictOld  = `DELETE FROM cache_entries e USING (
			SELECT repo, scope, key FROM cache_entries
			WHERE coalesce(last_hit_at, created_at) < $1
			ORDER BY coalesce(last_hit_at, created_at), repo, scope, key LIMIT $2
		) old
		WHERE e.repo = old.repo AND e.scope = old.scope AND e.key = old.key
		RETURNING e.repo, e.scope, e.key, e.sha256, e.size, e.blob_key, e.created_at, e.last_hit_at, e.upload_id`
	// evictOver removes, of each repository past $1 bytes, its least
	// recently used entries while the repository is still past $1 before
	// removing them (its total less the bytes of those used before).
	evictOver = `DELETE FROM cache_entries e USING (
			SELECT repo, scope, key, used FROM (
				SELECT repo, scope, key, coalesce(last_hit_at, created_at) AS used,
					sum(size) OVER (PARTITION BY repo) - sum(size) OVER (PARTITION BY repo
						ORDER BY coalesce(last_hit_at, created_at), scope, key ROWS UNBOUNDED PRECEDING) + size AS left_before
				FROM cache_entries
			) w
			WHERE left_before > $1
			ORDER BY used, repo, scope, key LIMIT $2
		) over
		WHERE e.repo = over.repo AND e.scope = over.scope AND e.key = over.key
		RETURNING e.repo, e.scope, e.key, e.sha256, e.size, e.blob_key, e.created_at, e.last_hit_at, e.upload_id`
	queryOrphans = `SELECT DISTINCT b FROM unnest($1::text[]) b
		WHERE NOT EXISTS (SELECT 1 FROM cache_entries WHERE blob_key = b) ORDER BY b`
	deleteBlob   = `DELETE FROM cache_entries WHERE blob_key = $1 RETURNING ` + entryColumns
	queryEntries = `SELECT ` + entryColumns + ` FROM cache_entries WHERE repo = $1
		ORDER BY coalesce(last_hit_at, created_at) DESC, scope, key`
)

// CacheLookup implements CacheIndex. Of two prefixes of one length that
// match, the first in q.RestoreKeys wins; of two entries created at once,
// the one whose key sorts first.
func (c *PostgresCacheIndex) CacheLookup(ctx context.Context, q IndexQuery, now time.Time) (*CacheEntry, error) {
	if err := checkQuery(q); err != nil {
		return nil, err
	}
	scopes := q.Scopes
	if len(scopes) == 0 {
		return nil, ctx.Err()
	}
	now = storedTime(now)
	keys := append([]string{q.Key}, q.FallbackKeys...)
	e, err := c.hit(ctx, lookupExact, q.Repo, now, keys, scopes)
	if err != nil || e != nil || len(q.RestoreKeys) == 0 {
		return e, err
	}
	ends := make([]string, len(q.RestoreKeys))
	for i, p := range q.RestoreKeys {
		ends[i] = prefixEnd(p)
	}
	return c.hit(ctx, lookupPrefix, q.Repo, now, q.RestoreKeys, ends, scopes)
}

// hit runs a lookup query and returns the entry it hit, or nil.
func (c *PostgresCacheIndex) hit(ctx context.Context, query string, args ...any) (*CacheEntry, error) {
	rows, err := c.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, interpretError(err)
	}
	entries, err := pgx.CollectRows(rows, scanEntry)
	if err != nil || len(entries) == 0 {
		return nil, interpretError(err)
	}
	return &entries[0], nil
}

// CacheInsert implements CacheIndex.
func (c *PostgresCacheIndex) CacheInsert(ctx context.Context, e *CacheEntry) error {
	if err := checkEntry(e); err != nil {
		return err
	}
	s := storedEntry(*e)
	tag, err := c.pool.Exec(ctx, insertEntry, s.Repo, s.Scope, s.Key, s.SHA256, s.Size, s.BlobKey, s.CreatedAt, nullTime(s.LastHitAt), s.UploadID)
	if err != nil {
		return interpretError(err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("artifacts: cache key %q in scope %q of %s: %w", e.Key, e.Scope, e.Repo, ErrCacheExists)
	}
	return nil
}

// CacheHasDigest implements CacheIndex.
func (c *PostgresCacheIndex) CacheHasDigest(ctx context.Context, repo, scope, sha256 string) (bool, error) {
	if err := checkTexts("the repository", repo, "the scope", scope, "the SHA-256", sha256); err != nil {
		return false, err
	}
	var ok bool
	err := c.pool.QueryRow(ctx, queryDigest, repo, scope, sha256).Scan(&ok)
	return ok, interpretError(err)
}

// CacheEvict implements CacheIndex. Entries go least recently used first
// (last hit, or created when never hit), of two used at once by
// repository, scope and key; the orphan blob keys are sorted.
func (c *PostgresCacheIndex) CacheEvict(ctx context.Context, budget int64, olderThan time.Time, limit int) ([]CacheEntry, []string, error) {
	if err := checkLimit(limit); err != nil {
		return nil, nil, err
	}
	var removed []CacheEntry
	var orphans []string
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		removed, orphans = nil, nil
		if _, err := tx.Exec(ctx, lockEvict); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, evictOld, olderThan, limit)
		if err != nil {
			return err
		}
		if removed, err = pgx.CollectRows(rows, scanEntry); err != nil {
			return err
		}
		// RETURNING keeps no order.
		slices.SortFunc(removed, byUse)
		if budget > 0 && len(removed) < limit {
			rows, err := tx.Query(ctx, evictOver, budget, limit-len(removed))
			if err != nil {
				return err
			}
			over, err := pgx.CollectRows(rows, scanEntry)
			if err != nil {
				return err
			}
			slices.SortFunc(over, byUse)
			removed = append(removed, over...)
		}
		if len(removed) == 0 {
			return nil
		}
		blobs := make([]string, len(removed))
		for i, e := range removed {
			blobs[i] = e.BlobKey
		}
		rows, err = tx.Query(ctx, queryOrphans, blobs)
		if err != nil {
			return err
		}
		orphans, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, nil, interpretError(err)
	}
	return removed, orphans, nil
}

// CacheDeleteBlob implements CacheIndex. The entries are sorted by
// repository, scope and key.
func (c *PostgresCacheIndex) CacheDeleteBlob(ctx context.Context, blobKey string) ([]CacheEntry, error) {
	if err := checkText("the blob key", blobKey, 0); err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, deleteBlob, blobKey)
	if err != nil {
		return nil, interpretError(err)
	}
	removed, err := pgx.CollectRows(rows, scanEntry)
	if err != nil {
		return nil, interpretError(err)
	}
	slices.SortFunc(removed, byID)
	return removed, nil
}

// CacheList implements CacheIndex. Of two entries used at once, the one
// whose scope, then key, sorts first comes first.
func (c *PostgresCacheIndex) CacheList(ctx context.Context, repo string) ([]CacheEntry, error) {
	if err := checkText("the repository", repo, 0); err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, queryEntries, repo)
	if err != nil {
		return nil, interpretError(err)
	}
	out, err := pgx.CollectRows(rows, scanEntry)
	return out, interpretError(err)
}

func scanEntry(row pgx.CollectableRow) (CacheEntry, error) {
	var e CacheEntry
	var hit *time.Time
	err := row.Scan(&e.Repo, &e.Scope, &e.Key, &e.SHA256, &e.Size, &e.BlobKey, &e.CreatedAt, &hit, &e.UploadID)
	e.CreatedAt = e.CreatedAt.UTC()
	if hit != nil {
		e.LastHitAt = hit.UTC()
	}
	return e, err
}
