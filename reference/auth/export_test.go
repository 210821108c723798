package auth

import "github.com/jackc/pgx/v5/pgxpool"

// FailureSources is how many client addresses s's failure limit
// remembers.
func FailureSources(s *Service) int { return s.fails.size() }

// PoolOf returns the pool of a PostgresStore.
func PoolOf(s *PostgresStore) *pgxpool.Pool { return s.pool }
