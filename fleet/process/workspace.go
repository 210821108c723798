package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A workspace is a directory cikit-<job>-<random> in the work root, and
// beside it its lock file, the same name with lockSuffix: an executor
// holds an exclusive flock on it for as long as the job runs. A
// workspace whose lock file nobody holds was left by an executor that
// died (SIGKILL, a crash, a lost machine), and the next executor on the
// same work root removes it (sweep). The lock file lies outside the
// workspace, where a sandboxed job cannot reach it, and is locked before
// it gets its name, so no sweep ever sees a live workspace unlocked.
const (
	workspacePrefix = "cikit-"
	lockSuffix      = ".cikit-lock"
	// lockTemp names a lock file not yet renamed to its workspace's.
	lockTemp = ".cikit-lock-"
)

// lockWorkspace creates ws's lock file, locked, and keeps it until
// unlockWorkspace.
func (e *Executor) lockWorkspace(ws string) error {
	f, err := os.CreateTemp(e.cfg.WorkRoot, lockTemp+"*")
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = os.Remove(f.Name())
		_ = f.Close()
		return fmt.Errorf("locking the workspace: %w", err)
	}
	if err := os.Rename(f.Name(), ws+lockSuffix); err != nil {
		_ = os.Remove(f.Name())
		_ = f.Close()
		return err
	}
	e.locksMu.Lock()
	defer e.locksMu.Unlock()
	if e.locks == nil {
		e.locks = map[string]*os.File{}
	}
	e.locks[ws] = f
	return nil
}

// unlockWorkspace removes ws's lock file and releases it: after the
// workspace itself is gone, or when it is kept, so that no sweep removes
// it.
func (e *Executor) unlockWorkspace(ws string) {
	e.locksMu.Lock()
	f := e.locks[ws]
	delete(e.locks, ws)
	e.locksMu.Unlock()
	if f == nil {
		return
	}
	if err := os.Remove(ws + lockSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		e.cfg.Logger.Warn("could not remove a workspace's lock file", "file", ws+lockSuffix, "err", err)
	}
	_ = f.Close()
}

// sweep removes the workspaces in the work root that executors which
// died left behind: those whose lock file no live executor holds. It
// touches nothing else: directories without a lock file of this format
// are not an executor's, or are kept on purpose (KeepWorkspaces).
func (e *Executor) sweep() {
	entries, err := os.ReadDir(e.cfg.WorkRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return // nothing left there; creating a workspace says what is wrong
	}
	if err != nil {
		e.cfg.Logger.Warn("could not look for leftover workspaces", "dir", e.cfg.WorkRoot, "err", err)
		return
	}
	for _, ent := range entries {
		name := ent.Name()
		var ws string
		switch {
		case strings.HasPrefix(name, workspacePrefix) && strings.HasSuffix(name, lockSuffix):
			ws = filepath.Join(e.cfg.WorkRoot, strings.TrimSuffix(name, lockSuffix))
		case strings.HasPrefix(name, lockTemp):
			// Died before naming it: no workspace of its own.
		default:
			continue
		}
		if !ent.Type().IsRegular() {
			continue
		}
		lock := filepath.Join(e.cfg.WorkRoot, name)
		f, err := os.Open(lock)
		if err != nil {
			continue // removed meanwhile
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close()
			continue // a live job's
		}
		if ws != "" {
			if fi, err := os.Lstat(ws); err == nil && fi.IsDir() {
				e.cfg.Logger.Info("removing a workspace left by an executor that died", "dir", ws)
				e.removeWorkspace(ws)
			}
			_ = os.RemoveAll(ws + filesSuffix)
			e.removeViews(ws)
		}
		_ = os.Remove(lock)
		_ = f.Close()
	}
}
