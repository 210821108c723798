package checkout

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A lock held elsewhere is waited for only as long as the caller's
// context allows; the late grant is given back.
func TestLockWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "m.lock")
	held, err := lockFile(context.Background(), path, syscall.LOCK_EX)
	require.NoError(t, err)

	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("job cancelled")
	cancel(stop)
	_, err = lockFile(ctx, path, syscall.LOCK_SH)
	require.ErrorIs(t, err, stop)

	// Shared locks do not exclude each other; an exclusive one waits.
	held.unlock()
	a, err := lockFile(context.Background(), path, syscall.LOCK_SH)
	require.NoError(t, err)
	b, err := lockFile(context.Background(), path, syscall.LOCK_SH)
	require.NoError(t, err)
	_, err = lockFile(ctx, path, syscall.LOCK_EX)
	require.ErrorIs(t, err, stop)
	a.unlock()
	b.unlock()
	c, err := lockFile(context.Background(), path, syscall.LOCK_EX)
	require.NoError(t, err)
	c.unlock()
}
