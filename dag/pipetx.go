package dag

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// batchSender sends batches in a transaction: a pgx.Tx or a pipeTx.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pipeTx is a transaction of batches whose BEGIN travels with its first
// batch and whose COMMIT travels with its last: two round trips fewer than
// a pgx.Tx, which sends each on its own. The fast path's transactions are
// a few batches each, so this is a good part of their latency.
type pipeTx struct {
	conn  *pgx.Conn
	begun bool
}

// SendBatch sends b in the transaction, beginning it first if it has not
// begun.
func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	t.begun = true
	b.QueuedQueries = slices.Insert(b.QueuedQueries, 0, &pgx.QueuedQuery{SQL: "begin"})
	br := t.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		return errResults{BatchResults: br, err: err}
	}
	return br
}

// commit sends b and the COMMIT that ends the transaction.
func (t *pipeTx) commit(ctx context.Context, b *pgx.Batch) error {
	b.Queue("commit")
	return t.SendBatch(ctx, b).Close()
}

// errResults answers every read with the error that began the batch.
type errResults struct {
	pgx.BatchResults
	err error
}

func (r errResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, r.err }
func (r errResults) Query() (pgx.Rows, error)         { return nil, r.err }
func (r errResults) QueryRow() pgx.Row                { return errRow{r.err} }
func (r errResults) Close() error                     { return errors.Join(r.err, r.BatchResults.Close()) }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// inPipeTx runs fn in a pipeTx, which fn ends with commit, and again when
// PostgreSQL aborted it for a deadlock or a serialization failure. A
// transaction fn leaves open is rolled back.
func (s *PostgresStore) inPipeTx(ctx context.Context, fn func(*pipeTx) error) error {
	for try := 1; ; try++ {
		err := s.pipeTxOnce(ctx, fn)
		var pgErr *pgconn.PgError
		if try < maxTxTries && errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") {
			continue
		}
		return err
	}
}

func (s *PostgresStore) pipeTxOnce(ctx context.Context, fn func(*pipeTx) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return interpretError(err)
	}
	defer c.Release()
	t := &pipeTx{conn: c.Conn()}
	err = fn(t)
	if c.Conn().PgConn().TxStatus() != 'I' {
		// Released in a transaction, the connection would be closed by
		// the pool; rolled back, it is kept.
		if _, rerr := c.Exec(context.WithoutCancel(ctx), "rollback"); rerr != nil && err == nil {
			err = interpretError(rerr)
		}
		if err == nil {
			err = errors.New("dag: internal error: a transaction was left open")
		}
	}
	return err
}
