package image

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Durability without a sync per pull.
//
// The cache's blobs and the Rootfs's trees are written without fsync:
// syncing each blob and each unpacked tree cost a journal commit per
// file and a flush of the whole file system per image, the larger part
// of a cold Prepare. Instead, before the rename that puts a blob or a
// tree in place, an empty marker named after it is made in a directory
// named after the kernel's boot ID (/proc/sys/kernel/random/boot_id,
// drawn anew at every boot), and a background syncfs(2), one at a time
// and coalescing the writes that come while it runs, removes the
// markers of what was written before it began.
//
// Written data that is not yet on disk is lost only when the kernel
// stops without writing back its page cache: a kernel crash or a power
// loss. The process's own death loses nothing, since the kernel holds
// the data and writes it back; and whatever loses data also changes the
// boot ID. So a marker of the current boot names something whole, and
// a marker of another boot names something a crash may have emptied or
// cut short: at open, a blob so marked is hashed again and removed if it
// no longer matches its digest, and a tree so marked, which has no such
// check, is removed, to be unpacked again. What no marker names was
// synced.
//
// This relies on the file system committing metadata changes in the
// order they were made, as the journaling ones do (ext4, XFS, btrfs):
// a blob's or tree's name never survives a crash that lost the marker
// made before it.

// bootIDFile holds the kernel's boot ID.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// readBootID returns the kernel's boot ID, or "" when it cannot be read
// (no /proc): then writes are synced as they are made.
func readBootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	id := string(bytes.TrimSpace(b))
	if !validBootID(id) {
		return ""
	}
	return id
}

// validBootID reports whether id can name a directory of markers.
func validBootID(id string) bool {
	return id != "" && len(id) <= 64 && strings.Trim(id, "0123456789abcdefABCDEF-") == ""
}

// markers is a directory of markers, Dir/<boot ID>/<name>, of what was
// written without sync.
type markers struct {
	dir  string
	boot string // the current boot ID, "" when unknown
}

// openMarkers makes the directory of the current boot's markers, unless
// the boot ID is unknown.
func openMarkers(dir, boot string) (markers, error) {
	m := markers{dir: dir, boot: boot}
	if boot == "" {
		return m, nil
	}
	if err := os.MkdirAll(m.bootDir(boot), 0o755); err != nil {
		return m, fmt.Errorf("make the directory of unsynced writes: %w", err)
	}
	return m, nil
}

// enabled reports whether writes are left to the background sync; if
// not, the boot ID is unknown and each write is synced as it is made.
func (m markers) enabled() bool { return m.boot != "" }

func (m markers) bootDir(boot string) string { return filepath.Join(m.dir, boot) }

// mark records name as written without sync in the current boot.
func (m markers) mark(name string) error {
	f, err := os.OpenFile(filepath.Join(m.bootDir(m.boot), name), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("mark %s as unsynced: %w", name, err)
	}
	return f.Close()
}

// unmark removes the marker of name, once synced. A marker that stays
// only costs a check at the next open after a reboot.
func (m markers) unmark(name string) {
	_ = os.Remove(filepath.Join(m.bootDir(m.boot), name))
}

// list returns the names marked in the current boot and those marked in
// earlier ones.
func (m markers) list() (current []string, earlier map[string]bool, err error) {
	earlier = map[string]bool{}
	boots, err := os.ReadDir(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, earlier, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, b := range boots {
		names, err := readNames(filepath.Join(m.dir, b.Name()))
		if err != nil {
			return nil, nil, err
		}
		if b.Name() == m.boot {
			current = names
			continue
		}
		for _, n := range names {
			earlier[n] = true
		}
	}
	return current, earlier, nil
}

// dropEarlier removes the markers of earlier boots, once what they name
// was checked or removed.
func (m markers) dropEarlier() error {
	boots, err := os.ReadDir(m.dir)
	if err != nil {
		return err
	}
	for _, b := range boots {
		if b.Name() != m.boot {
			if err := os.RemoveAll(filepath.Join(m.dir, b.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// syncer runs syncfs(2) on a file system in the background, one at a
// time: the writes requested while one runs are covered by the next.
type syncer struct {
	dir string // a directory of the file system
	// begin is called before each sync; the function it returns, after
	// the sync succeeded, is given what was written before it began.
	begin func() (commit func())

	mu      sync.Mutex
	pending bool // a write came after the running sync began
	running bool
	idle    *sync.Cond
	err     error // of the last sync, nil once one succeeds
}

func newSyncer(dir string, begin func() (commit func())) *syncer {
	s := &syncer{dir: dir, begin: begin}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// request has the writes made so far synced in the background.
func (s *syncer) request() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = true
	if !s.running {
		s.running = true
		go s.run()
	}
}

func (s *syncer) run() {
	s.mu.Lock()
	for s.pending {
		s.pending = false
		s.mu.Unlock()
		commit := s.begin()
		err := syncfs(s.dir)
		if err == nil {
			commit()
		}
		s.mu.Lock()
		s.err = err
		if err != nil {
			// What was not synced stays marked; the next write tries
			// again.
			break
		}
	}
	s.running = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

// wait returns once the writes requested before it are synced, or the
// sync failed, with the sync's error.
func (s *syncer) wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.running {
		s.idle.Wait()
	}
	return s.err
}

// syncfs writes back the file system holding dir.
func syncfs(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("sync the file system of %s: %w", dir, err)
	}
	return nil
}
