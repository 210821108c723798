package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// MaxHashFiles bounds the files hashFiles reads: past it the expression
// fails rather than keep a step waiting.
const MaxHashFiles = 50000

// hashFiles is GitHub's hashFiles(patterns...) in the job's workspace.
func (g *GitHub) hashFiles(patterns []string) (string, error) {
	return HashFiles(g.p.Workspace, patterns)
}

// HashFiles is what GitHub's hashFiles(patterns...) computes: the SHA-256
// of the SHA-256 sums of workspace's regular files that match a pattern
// (and none of the later "!" ones), in the order of a walk of workspace
// with each directory's entries sorted by name, in lowercase hex; "" when
// none matches. Patterns are relative to workspace (an absolute one must
// lie inside it), "**" spanning directories. Cache keys use it too:
// native hash("glob", …) and GitLab's cache:key:files. At most
// MaxHashFiles files are read.
func HashFiles(workspace string, patterns []string) (string, error) {
	if workspace == "" {
		return "", fmt.Errorf("hashFiles: the job has no workspace")
	}
	type pat struct {
		neg  bool
		segs []string
	}
	var pats []pat
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if filepath.IsAbs(p) {
			rel, err := filepath.Rel(workspace, p)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				return "", fmt.Errorf("hashFiles: %q is outside the workspace", p)
			}
			p = rel
		}
		p = path.Clean(filepath.ToSlash(p))
		if p == "." || p == "" {
			continue
		}
		if _, err := path.Match(strings.ReplaceAll(p, "**", "*"), ""); err != nil {
			return "", fmt.Errorf("hashFiles: bad pattern %q: %w", p, err)
		}
		pats = append(pats, pat{neg: neg, segs: strings.Split(p, "/")})
	}
	sum := sha256.New()
	n := 0
	root := os.DirFS(workspace)
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name == "." {
				return nil
			}
			dir := strings.Split(name, "/")
			for _, p := range pats {
				if !p.neg && mayMatchUnder(p.segs, dir) {
					return nil
				}
			}
			return fs.SkipDir // no pattern reaches into it: .git, node_modules …
		}
		if !d.Type().IsRegular() {
			return nil
		}
		match := false
		segs := strings.Split(name, "/")
		for _, p := range pats {
			if globMatch(p.segs, segs) {
				match = !p.neg
			}
		}
		if !match {
			return nil
		}
		n++
		if n > MaxHashFiles {
			return fmt.Errorf("more than %d files match", MaxHashFiles)
		}
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		sum.Write(h.Sum(nil))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hashFiles: %w", err)
	}
	if n == 0 {
		return "", nil
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// globMatch matches a path's segments against a pattern's, "**" matching
// any number of segments.
func globMatch(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if globMatch(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// mayMatchUnder reports whether a pattern may match a path below the
// directory whose segments are dir.
func mayMatchUnder(pat, dir []string) bool {
	for i, d := range dir {
		if i >= len(pat)-1 {
			return i < len(pat) && pat[i] == "**"
		}
		if pat[i] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[i], d); !ok {
			return false
		}
	}
	return true
}
