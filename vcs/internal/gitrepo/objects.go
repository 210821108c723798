// Package gitrepo gives the repositories of the test forges (githubtest,
// gitlabtest) real git history: it builds git's blob, tree, commit and
// tag objects from a forge's files and writes them and the refs into a
// bare repository on disk, which the forge serves read-only with
// vcs/gitserve, so a real git client clones and fetches what the fake
// API describes.
package gitrepo

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// Object is a git object: its kind ("blob", "tree", "commit" or "tag")
// and its content, without git's header.
type Object struct {
	Kind string
	Data []byte
}

// SHA returns the object's name, the SHA-1 git gives it.
func (o Object) SHA() string { return Hash(o.Kind, o.Data) }

// Hash is the SHA-1 git names an object of kind with data by.
func Hash(kind string, data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", kind, len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// Blob is the blob object of a file's content.
func Blob(data []byte) Object { return Object{Kind: "blob", Data: data} }

// Trees builds the tree objects of files, a map of slash-separated
// paths to the SHAs of their blobs (regular files, mode 100644). It
// returns the SHA of every directory, "" for the root, and the trees'
// objects. A path that is also a directory of another path is an error.
func Trees(files map[string]string) (dirs map[string]string, objs []Object, err error) {
	// children[dir] holds the names directly in dir; a name that is a
	// directory ends in "/".
	children := map[string]map[string]bool{"": {}}
	for p := range files {
		if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
			return nil, nil, fmt.Errorf("gitrepo: %q is not a file path", p)
		}
		for d, name := path.Dir(p), path.Base(p); ; d, name = path.Dir(d), path.Base(d)+"/" {
			key := d
			if d == "." {
				key = ""
			}
			if children[key] == nil {
				children[key] = map[string]bool{}
			}
			children[key][name] = true
			if d == "." {
				break
			}
		}
	}
	for d := range children {
		if _, ok := files[d]; ok && d != "" {
			return nil, nil, fmt.Errorf("gitrepo: %q is both a file and a directory", d)
		}
	}
	// Deepest directories first, so each tree's subtrees are known.
	depth := func(d string) int {
		if d == "" {
			return -1
		}
		return strings.Count(d, "/")
	}
	order := slices.SortedFunc(maps.Keys(children), func(a, b string) int { return depth(b) - depth(a) })
	dirs = make(map[string]string, len(children))
	for _, d := range order {
		// git sorts a tree's entries by name, a directory's name as if
		// it ended in "/": exactly how children spells them.
		var buf bytes.Buffer
		for _, name := range slices.Sorted(maps.Keys(children[d])) {
			full := path.Join(d, strings.TrimSuffix(name, "/"))
			mode, sha := "100644", files[full]
			if strings.HasSuffix(name, "/") {
				mode, sha = "40000", dirs[full]
			}
			raw, err := hex.DecodeString(sha)
			if err != nil || len(raw) != sha1.Size {
				return nil, nil, fmt.Errorf("gitrepo: %q has no object SHA (%q)", full, sha)
			}
			fmt.Fprintf(&buf, "%s %s\x00", mode, strings.TrimSuffix(name, "/"))
			buf.Write(raw)
		}
		o := Object{Kind: "tree", Data: buf.Bytes()}
		dirs[d] = o.SHA()
		objs = append(objs, o)
	}
	return dirs, objs, nil
}

// Ident is the author and committer of the commits and the tagger of
// the tags that Commit and Tag build.
type Ident struct{ Name, Email string }

func (id Ident) at(when time.Time) string {
	return fmt.Sprintf("%s <%s> %d +0000", id.Name, id.Email, when.Unix())
}

// Commit is the commit object of tree with parents and message, made by
// who at when (to the second, in UTC).
func Commit(tree string, parents []string, message string, who Ident, when time.Time) Object {
	var b strings.Builder
	fmt.Fprintf(&b, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	fmt.Fprintf(&b, "author %s\ncommitter %s\n\n%s\n", who.at(when), who.at(when), strings.TrimSuffix(message, "\n"))
	return Object{Kind: "commit", Data: []byte(b.String())}
}

// Tag is the annotated tag object name with message that points at
// commit target, made by who at when.
func Tag(target, name, message string, who Ident, when time.Time) Object {
	return Object{Kind: "tag", Data: fmt.Appendf(nil, "object %s\ntype commit\ntag %s\ntagger %s\n\n%s\n",
		target, name, who.at(when), strings.TrimSuffix(message, "\n"))}
}
