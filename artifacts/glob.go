package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// selected is one path Pack archives, relative to the root, with what
// Lstat said of it.
type selected struct {
	name string
	info fs.FileInfo
}

// selection gathers the paths PackOptions select, each once.
type selection struct {
	ctx     context.Context
	root    *os.Root
	fsys    fs.FS
	exclude []string
	found   map[string]fs.FileInfo
}

// selectPaths returns the paths opts selects in root, sorted by name.
func selectPaths(ctx context.Context, root *os.Root, opts PackOptions) ([]selected, error) {
	s := &selection{ctx: ctx, root: root, fsys: root.FS(), found: map[string]fs.FileInfo{}}
	for _, p := range opts.Exclude {
		clean, err := cleanPattern(p)
		if err != nil {
			return nil, fmt.Errorf("exclude %q: %w", p, err)
		}
		s.exclude = append(s.exclude, clean)
	}
	for _, p := range opts.Paths {
		clean, err := cleanPattern(p)
		if err != nil {
			return nil, fmt.Errorf("path %q: %w", p, err)
		}
		if err := s.addPattern(p, clean); err != nil {
			return nil, err
		}
	}
	for _, f := range opts.Files {
		clean, err := cleanPattern(f)
		if err != nil {
			return nil, fmt.Errorf("file %q: %w", f, err)
		}
		if err := s.addLiteral(f, clean); err != nil {
			return nil, err
		}
	}
	out := make([]selected, 0, len(s.found))
	for name, info := range s.found {
		out = append(out, selected{name: name, info: info})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// cleanPattern turns a path or glob as people write it ("./dist/",
// "bin/app") into the form matched against slash-separated names
// relative to the root ("dist", "bin/app"), and refuses one that would
// leave the root.
func cleanPattern(p string) (string, error) {
	if p == "" {
		return "", errors.New("the path is empty; expected a path or glob relative to the workspace")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("the path contains a NUL byte")
	}
	if path.IsAbs(p) {
		return "", errors.New("the path is absolute; expected a path relative to the workspace")
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", errors.New("the path leaves the workspace; expected a path inside it")
	}
	if !doublestar.ValidatePattern(clean) {
		return "", errors.New("the glob is malformed (an unclosed [ or {, or a trailing \\)")
	}
	return clean, nil
}

// addPattern adds what the glob pattern (orig as given, clean as
// cleanPattern returned it) matches. Pack never follows a symlink, so a
// pattern whose fixed leading directories pass through one is refused,
// naming it, rather than matching nothing in silence.
func (s *selection) addPattern(orig, clean string) error {
	if !strings.ContainsAny(clean, "*?[{\\") {
		return s.addLiteral(orig, clean)
	}
	base, _ := doublestar.SplitPattern(clean)
	if base != "." {
		ok, err := s.checkDirs(orig, base)
		if err != nil || !ok {
			return err
		}
	}
	var matches []string
	err := doublestar.GlobWalk(s.fsys, clean, func(name string, _ fs.DirEntry) error {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		matches = append(matches, name)
		return nil
	}, doublestar.WithNoFollow(), doublestar.WithFailOnIOErrors())
	if err != nil {
		return fmt.Errorf("path %q: %w", orig, err)
	}
	for _, name := range matches {
		info, err := s.root.Lstat(name)
		if err != nil {
			return fmt.Errorf("path %q: %w", orig, err)
		}
		if err := s.add(name, info); err != nil {
			return err
		}
	}
	return nil
}

// addLiteral adds the file, directory or symlink name names; a missing
// one adds nothing.
func (s *selection) addLiteral(orig, name string) error {
	if dir := path.Dir(name); dir != "." {
		ok, err := s.checkDirs(orig, dir)
		if err != nil || !ok {
			return err
		}
	}
	info, err := s.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("path %q: %w", orig, err)
	}
	return s.add(name, info)
}

// checkDirs reports whether every leading directory of dir, dir itself
// included, exists as a directory. A symlink among them is an error
// naming it; a missing one or a file is false.
func (s *selection) checkDirs(orig, dir string) (bool, error) {
	for i := 0; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		info, err := s.root.Lstat(dir[:i])
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("path %q: %w", orig, err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return false, fmt.Errorf("path %q passes through the symlink %q, which Pack does not follow; name the directory it points to instead", orig, dir[:i])
		}
		if !info.IsDir() {
			return false, nil
		}
	}
	return true, nil
}

// excluded reports whether name or one of its parent directories matches
// an exclude pattern.
func (s *selection) excluded(name string) bool {
	for _, ex := range s.exclude {
		for p := name; ; p = path.Dir(p) {
			if ok, _ := doublestar.Match(ex, p); ok {
				return true
			}
			if !strings.Contains(p, "/") {
				break
			}
		}
	}
	return false
}

// add records name, and when it is a directory (not a symlink to one)
// everything under it.
func (s *selection) add(name string, info fs.FileInfo) error {
	if name == "." {
		return s.walk(".")
	}
	if s.excluded(name) {
		return nil
	}
	if err := s.record(name, info); err != nil {
		return err
	}
	if info.IsDir() {
		return s.walk(name)
	}
	return nil
}

// walk records everything under the directory dir that no exclude
// pattern matches.
func (s *selection) walk(dir string) error {
	return fs.WalkDir(s.fsys, dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %q: %w", name, err)
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if name == dir {
			return nil
		}
		if s.excluded(name) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("walk %q: %w", name, err)
		}
		return s.record(name, info)
	})
}

// record notes one path, refusing a kind of file an archive does not
// hold.
func (s *selection) record(name string, info fs.FileInfo) error {
	switch m := info.Mode(); {
	case m.IsRegular(), m.IsDir(), m&fs.ModeSymlink != 0:
	default:
		return fmt.Errorf("%q is a %s; archives hold only regular files, directories and symlinks (exclude it)", name, kindOf(m))
	}
	s.found[name] = info
	return nil
}

// kindOf names the kind of a file that is neither regular, a directory
// nor a symlink.
func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "special file"
	}
}
