package secrets

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Replays remembers the ID tokens the platform accepted, so that each is
// accepted once: a token a runner presented is useless to whoever copies
// it from the runner's traffic or memory afterwards. MemoryReplays and
// PostgresReplays implement it; secretstest.RunReplaysTests is the suite
// they pass. Implementations are safe for concurrent use.
type Replays interface {
	// Use records the use of the token of ID jti, which expires at
	// expires (its exp, plus the verifier's clock skew). It returns an
	// error wrapping ErrReplayed if the ID was used before and its record
	// has not expired: of two concurrent Uses of one ID, one succeeds. An
	// empty jti is ErrInvalid. Once expires has passed the ID may be used
	// again; the token it belongs to is refused as expired by then.
	Use(ctx context.Context, jti string, expires time.Time) error
	// Purge deletes the records that have expired and returns how many.
	// Use works without it; it bounds the records kept.
	Purge(ctx context.Context) (int, error)
}

// MaxTokenIDBytes bounds the ID (jti) of a token Replays records.
const MaxTokenIDBytes = 256

func validJTI(jti string) error {
	if jti == "" || len(jti) > MaxTokenIDBytes {
		return fmt.Errorf("%w: a token ID (jti) of %d bytes; it has 1 to %d", ErrInvalid, len(jti), MaxTokenIDBytes)
	}
	return nil
}

// MemoryReplays is Replays in memory, for one process. It drops expired
// records as it goes.
type MemoryReplays struct {
	now  func() time.Time
	mu   sync.Mutex
	used map[string]time.Time
	// sweepAt is the number of records at which Use next purges, so that
	// purging costs O(1) per Use amortised.
	sweepAt int
}

var _ Replays = (*MemoryReplays)(nil)

// NewMemoryReplays returns an empty MemoryReplays reading the time from
// now (nil: time.Now).
func NewMemoryReplays(now func() time.Time) *MemoryReplays {
	if now == nil {
		now = time.Now
	}
	return &MemoryReplays{now: now, used: map[string]time.Time{}, sweepAt: 1024}
}

// Use implements Replays.
func (m *MemoryReplays) Use(ctx context.Context, jti string, expires time.Time) error {
	if err := validJTI(jti); err != nil {
		return err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if exp, ok := m.used[jti]; ok && exp.After(now) {
		return fmt.Errorf("%w: token %s was used before", ErrReplayed, jti)
	}
	m.used[jti] = expires
	if len(m.used) >= m.sweepAt {
		m.purge(now)
		m.sweepAt = max(1024, 2*len(m.used))
	}
	return nil
}

// Purge implements Replays.
func (m *MemoryReplays) Purge(ctx context.Context) (int, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.purge(now), nil
}

func (m *MemoryReplays) purge(now time.Time) int {
	n := len(m.used)
	for jti, exp := range m.used {
		if !exp.After(now) {
			delete(m.used, jti)
		}
	}
	return n - len(m.used)
}

const (
	// A record that has expired is taken over, as if it were not there.
	useToken = `INSERT INTO secrets_token_uses (jti, expires_at) VALUES ($1, $2)
		ON CONFLICT (jti) DO UPDATE SET expires_at = EXCLUDED.expires_at
		WHERE secrets_token_uses.expires_at <= $3`
	purgeTokens = `DELETE FROM secrets_token_uses WHERE expires_at <= $1`
)

// PostgresReplays is Replays in PostgreSQL's secrets_token_uses table,
// shared by the server processes of one platform. Run Purge now and then
// (say, every few minutes) to drop expired records.
type PostgresReplays struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

var _ Replays = (*PostgresReplays)(nil)

// NewPostgresReplays returns Replays over pool reading the time from now
// (nil: time.Now). Call Migrate before its first use.
func NewPostgresReplays(pool *pgxpool.Pool, now func() time.Time) *PostgresReplays {
	if now == nil {
		now = time.Now
	}
	return &PostgresReplays{pool: pool, now: now}
}

// Migrate applies the package's migrations the database does not have
// yet.
func (r *PostgresReplays) Migrate(ctx context.Context) error { return migrate(ctx, r.pool) }

// Use implements Replays.
func (r *PostgresReplays) Use(ctx context.Context, jti string, expires time.Time) error {
	if err := validJTI(jti); err != nil {
		return err
	}
	tag, err := r.pool.Exec(ctx, useToken, jti, expires, r.now())
	if err != nil {
		return fmt.Errorf("secrets: record the use of token %s: %w", jti, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: token %s was used before", ErrReplayed, jti)
	}
	return nil
}

// Purge implements Replays.
func (r *PostgresReplays) Purge(ctx context.Context) (int, error) {
	tag, err := r.pool.Exec(ctx, purgeTokens, r.now())
	if err != nil {
		return 0, fmt.Errorf("secrets: purge token uses: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
