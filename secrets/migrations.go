package secrets

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cikit/cikit/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations returns the package's schema migrations, numbered SQL files applied in order by the
// Migrate methods of its PostgreSQL implementations.
func Migrations() fs.FS { sub, _ := fs.Sub(migrations, "migrations"); return sub }

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.Apply(ctx, pool, "secrets", Migrations())
}
