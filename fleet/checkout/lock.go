package checkout

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// fileLock is an flock(2) on a file: between processes (several runners
// sharing a cache directory) and between goroutines of one, since each
// lock opens the file anew.
type fileLock struct{ f *os.File }

// lockFile takes an exclusive (syscall.LOCK_EX) or shared
// (syscall.LOCK_SH) lock on path, creating the file, waiting until ctx
// ends.
func lockFile(ctx context.Context, path string, how int) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f, how|syscall.LOCK_NB); err == nil {
		return &fileLock{f}, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, err
	}
	// flock cannot be interrupted by a context: wait in a goroutine,
	// which, when the caller gave up, releases the lock it got late.
	got := make(chan error, 1)
	go func() { got <- flock(f, how) }()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, err
		}
		return &fileLock{f}, nil
	case <-ctx.Done():
		go func() {
			<-got
			f.Close() // closing the file releases the lock
		}()
		return nil, context.Cause(ctx)
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// unlock releases the lock.
func (l *fileLock) unlock() { l.f.Close() }
