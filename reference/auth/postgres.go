package auth

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations, numbered SQL files
// applied in order by PostgresStore.Migrate.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrations, "migrations")
	return sub
}

// PostgresStore is a Store in PostgreSQL tables auth_*. Call Migrate
// before first use. Several stores, in several processes, may share one
// database.
type PostgresStore struct {
	pool *pgxpool.Pool
}

var _ Store = (*PostgresStore)(nil)

// NewPostgresStore returns a store in pool's database.
func NewPostgresStore(pool *pgxpool.Pool) (*PostgresStore, error) {
	if pool == nil {
		return nil, errors.New("auth: NewPostgresStore needs a pool")
	}
	return &PostgresStore{pool: pool}, nil
}

// Migrate creates or updates the store's tables. Several processes may
// migrate at once.
func (s *PostgresStore) Migrate(ctx context.Context) error {
	return pgmigrate.Apply(ctx, s.pool, "auth", Migrations())
}

// interpretError turns PostgreSQL's errors into the Store's.
func interpretError(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code {
		case "23505":
			return fmt.Errorf("%s: %w", what, ErrConflict)
		case "23503":
			return fmt.Errorf("%s: %w: it names a user that does not exist", what, ErrNotFound)
		}
	}
	return fmt.Errorf("auth: %s: %w", what, err)
}

// exec runs a statement that must change one row.
func (s *PostgresStore) exec(ctx context.Context, what, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return interpretError(err, what)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}

func (s *PostgresStore) UserCreate(ctx context.Context, u *User) error {
	_, err := s.pool.Exec(ctx, sqlUserCreate, u.ID, u.Login, u.Name, u.Email, u.Service, u.Created, u.Disabled)
	return interpretError(err, "creating user "+strconv.Quote(u.Login))
}

func scanUser(row pgx.Row) (*User, error) {
	u := &User{}
	err := row.Scan(&u.ID, &u.Login, &u.Name, &u.Email, &u.Service, &u.Created, &u.Disabled)
	u.Created = u.Created.UTC()
	return u, err
}

func (s *PostgresStore) UserGet(ctx context.Context, id string) (*User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, sqlUserGet, id))
	return u, interpretError(err, "user "+strconv.Quote(id))
}

func (s *PostgresStore) UserByLogin(ctx context.Context, login string) (*User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, sqlUserByLogin, login))
	return u, interpretError(err, "user "+strconv.Quote(login))
}

func (s *PostgresStore) UserList(ctx context.Context) ([]*User, error) {
	rows, err := s.pool.Query(ctx, sqlUserList)
	if err != nil {
		return nil, interpretError(err, "listing users")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*User, error) { return scanUser(r) })
	return out, interpretError(err, "listing users")
}

func (s *PostgresStore) UserSetDisabled(ctx context.Context, id string, disabled bool) error {
	return s.exec(ctx, "user "+strconv.Quote(id), sqlUserDisabled, id, disabled)
}

func (s *PostgresStore) IdentityLink(ctx context.Context, issuer, subject, userID string) error {
	_, err := s.pool.Exec(ctx, sqlIdentityLink, issuer, subject, userID)
	return interpretError(err, "identity "+subject+" of "+issuer)
}

func (s *PostgresStore) IdentityUser(ctx context.Context, issuer, subject string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, sqlIdentityUser, issuer, subject).Scan(&id)
	return id, interpretError(err, "identity "+subject+" of "+issuer)
}

// timeOrNil stores the zero time as NULL.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (s *PostgresStore) TokenCreate(ctx context.Context, t *Token) error {
	return tokenCreate(ctx, s.pool, t)
}

type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func tokenCreate(ctx context.Context, db execer, t *Token) error {
	_, err := db.Exec(ctx, sqlTokenCreate, t.ID, t.User, t.Name, t.Digest[:], t.Created, timeOrNil(t.Expires), int16(t.MaxRole), t.Org, t.Repo)
	return interpretError(err, "creating token "+strconv.Quote(t.ID))
}

func scanToken(row pgx.Row) (*Token, error) {
	t := &Token{}
	var digest []byte
	var expires, revoked, used *time.Time
	var role int16
	if err := row.Scan(&t.ID, &t.User, &t.Name, &digest, &t.Created, &expires, &revoked, &used, &t.LastUsedFrom, &role, &t.Org, &t.Repo); err != nil {
		return nil, err
	}
	copy(t.Digest[:], digest)
	t.Created = t.Created.UTC()
	for _, p := range []struct {
		dst *time.Time
		src *time.Time
	}{{&t.Expires, expires}, {&t.RevokedAt, revoked}, {&t.LastUsedAt, used}} {
		if p.src != nil {
			*p.dst = p.src.UTC()
		}
	}
	t.MaxRole = Role(role)
	return t, nil
}

func (s *PostgresStore) TokenGet(ctx context.Context, id string) (*Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, sqlTokenGet, id))
	return t, interpretError(err, "token "+strconv.Quote(id))
}

func (s *PostgresStore) TokenByDigest(ctx context.Context, d Digest) (*Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, sqlTokenByDigest, d[:]))
	return t, interpretError(err, "token")
}

func (s *PostgresStore) TokenList(ctx context.Context, user string) ([]*Token, error) {
	rows, err := s.pool.Query(ctx, sqlTokenList, user)
	if err != nil {
		return nil, interpretError(err, "listing tokens")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Token, error) { return scanToken(r) })
	return out, interpretError(err, "listing tokens")
}

func (s *PostgresStore) TokenRevoke(ctx context.Context, id string, at time.Time) error {
	return s.exec(ctx, "token "+strconv.Quote(id), sqlTokenRevoke, id, at)
}

func (s *PostgresStore) TokenTouch(ctx context.Context, id string, at time.Time, from string) error {
	return s.exec(ctx, "token "+strconv.Quote(id), sqlTokenTouch, id, at, from)
}

func (s *PostgresStore) BindingGrant(ctx context.Context, b Binding) error {
	_, err := s.pool.Exec(ctx, sqlBindingGrant, b.User, int16(b.Role), b.Org, b.Repo)
	return interpretError(err, "granting "+b.Role.String()+" to "+b.User)
}

func (s *PostgresStore) BindingRevoke(ctx context.Context, b Binding) error {
	return s.exec(ctx, fmt.Sprintf("binding %s of %s on %q/%q", b.Role, b.User, b.Org, b.Repo), sqlBindingRevoke, b.User, int16(b.Role), b.Org, b.Repo)
}

func (s *PostgresStore) BindingList(ctx context.Context, login string) ([]Binding, error) {
	rows, err := s.pool.Query(ctx, sqlBindingList, login)
	if err != nil {
		return nil, interpretError(err, "listing bindings")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Binding, error) {
		var b Binding
		var role int16
		err := r.Scan(&b.User, &role, &b.Org, &b.Repo)
		b.Role = Role(role)
		return b, err
	})
	return out, interpretError(err, "listing bindings")
}

func (s *PostgresStore) SessionCreate(ctx context.Context, x *Session) error {
	_, err := s.pool.Exec(ctx, sqlSessionCreate, x.Digest[:], x.User, x.CSRF, x.Created, x.Expires, x.LastSeen)
	return interpretError(err, "creating session")
}

func (s *PostgresStore) SessionGet(ctx context.Context, d Digest) (*Session, error) {
	x := &Session{}
	var digest []byte
	err := s.pool.QueryRow(ctx, sqlSessionGet, d[:]).Scan(&digest, &x.User, &x.CSRF, &x.Created, &x.Expires, &x.LastSeen)
	copy(x.Digest[:], digest)
	x.Created, x.Expires, x.LastSeen = x.Created.UTC(), x.Expires.UTC(), x.LastSeen.UTC()
	return x, interpretError(err, "session")
}

func (s *PostgresStore) SessionTouch(ctx context.Context, d Digest, at time.Time) error {
	return s.exec(ctx, "session", sqlSessionTouch, d[:], at)
}

func (s *PostgresStore) SessionDelete(ctx context.Context, d Digest) error {
	_, err := s.pool.Exec(ctx, sqlSessionDelete, d[:])
	return interpretError(err, "deleting session")
}

func (s *PostgresStore) AuditAppend(ctx context.Context, e *Entry) error {
	var id int64
	err := s.pool.QueryRow(ctx, sqlAuditAppend, e.Time, e.Actor, e.Action, e.Target, e.Detail, e.Remote, e.Outcome).Scan(&id)
	if err != nil {
		return interpretError(err, "appending to the audit log")
	}
	e.ID = strconv.FormatInt(id, 10)
	return nil
}

func (s *PostgresStore) AuditList(ctx context.Context, q AuditQuery) ([]Entry, error) {
	limit, before, err := q.normalize()
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlAuditList, before, q.Actor, q.Action, q.TargetPrefix, limit)
	if err != nil {
		return nil, interpretError(err, "listing the audit log")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		var id int64
		err := r.Scan(&id, &e.Time, &e.Actor, &e.Action, &e.Target, &e.Detail, &e.Remote, &e.Outcome)
		e.ID, e.Time = strconv.FormatInt(id, 10), e.Time.UTC()
		return e, err
	})
	if out == nil && err == nil {
		out = []Entry{}
	}
	return out, interpretError(err, "listing the audit log")
}

func (s *PostgresStore) AdminBootstrap(ctx context.Context, p *BootstrapParams) (created bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlBootstrapLock); err != nil {
			return err
		}
		var has bool
		if err := tx.QueryRow(ctx, sqlHasAdmin, int16(RoleAdmin)).Scan(&has); err != nil || has {
			return err
		}
		userID := p.User.ID
		switch u, err := scanUser(tx.QueryRow(ctx, sqlUserByLogin, p.User.Login)); {
		case err == nil:
			userID = u.ID
		case errors.Is(err, pgx.ErrNoRows):
			u := &p.User
			if _, err := tx.Exec(ctx, sqlUserCreate, u.ID, u.Login, u.Name, u.Email, u.Service, u.Created, u.Disabled); err != nil {
				return err
			}
		default:
			return err
		}
		t := p.Token
		t.User = userID
		if err := tokenCreate(ctx, tx, &t); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlBindingGrant, p.User.Login, int16(RoleAdmin), "", ""); err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return false, interpretError(err, "bootstrapping the admin")
	}
	return created, nil
}
