package gitrepo

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Repo is a bare git repository on disk that a test forge writes its
// objects and refs into. It is safe for concurrent use.
type Repo struct {
	dir string

	mu      sync.Mutex
	written map[string]bool
}

// Create makes the bare repository dir (its parents too) for Write and
// SetRefs, configured to let a client fetch any commit by its SHA, as
// GitHub and GitLab do, and to refuse pushes.
func Create(dir string) (*Repo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("gitrepo: %w", err)
	}
	out, err := gitCommand(dir, "init", "--bare", "--quiet", dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("gitrepo: git init --bare %s: %w: %s", dir, err, out)
	}
	for _, kv := range [][2]string{
		{"uploadpack.allowAnySHA1InWant", "true"},
		{"uploadpack.allowReachableSHA1InWant", "true"},
		{"http.receivepack", "false"},
	} {
		if out, err := gitCommand(dir, "--git-dir", dir, "config", kv[0], kv[1]).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("gitrepo: git config %s in %s: %w: %s", kv[0], dir, err, out)
		}
	}
	return &Repo{dir: dir, written: map[string]bool{}}, nil
}

// Dir returns the repository's directory.
func (r *Repo) Dir() string { return r.dir }

// Write stores objs as loose objects, each once.
func (r *Repo) Write(objs ...Object) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range objs {
		sha := o.SHA()
		if r.written[sha] {
			continue
		}
		if err := r.writeObject(sha, o); err != nil {
			return err
		}
		r.written[sha] = true
	}
	return nil
}

func (r *Repo) writeObject(sha string, o Object) error {
	dir := filepath.Join(r.dir, "objects", sha[:2])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gitrepo: %w", err)
	}
	var buf bytes.Buffer
	z := zlib.NewWriter(&buf)
	fmt.Fprintf(z, "%s %d\x00", o.Kind, len(o.Data))
	z.Write(o.Data)
	if err := z.Close(); err != nil {
		return fmt.Errorf("gitrepo: compressing %s %s: %w", o.Kind, sha, err)
	}
	return writeAtomic(filepath.Join(dir, sha[2:]), buf.Bytes())
}

// SetRefs replaces the repository's refs with refs (full names such as
// "refs/heads/main" to SHAs) and points HEAD at the branch head.
func (r *Repo) SetRefs(head string, refs map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, sha := range refs {
		if !strings.HasPrefix(name, "refs/") || strings.ContainsAny(name, " \n\x00") || len(sha) != 40 {
			return fmt.Errorf("gitrepo: ref %q → %q is not a ref name and a SHA", name, sha)
		}
	}
	// Only packed-refs holds refs: nothing writes loose ones, which would
	// shadow it, since the repository takes no pushes.
	var b strings.Builder
	b.WriteString("# pack-refs with: sorted \n")
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		fmt.Fprintf(&b, "%s %s\n", refs[name], name)
	}
	if err := writeAtomic(filepath.Join(r.dir, "packed-refs"), []byte(b.String())); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(r.dir, "HEAD"), []byte("ref: refs/heads/"+head+"\n"))
}

// writeAtomic replaces file with data, so that a git process reading it
// meanwhile sees the old content or the new, never a part.
func writeAtomic(file string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(file), ".tmp-*")
	if err != nil {
		return fmt.Errorf("gitrepo: %w", err)
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), file)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("gitrepo: writing %s: %w", file, err)
	}
	return nil
}

// gitCommand is git run in dir with no system or user configuration.
func gitCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir)
	return cmd
}

// cleanEnv is the environment git runs in: no system or user
// configuration (HOME is home, which holds none), nothing of the test's.
func cleanEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C"}
}

// Borrow makes r read the objects of from too (git's alternates), as a
// fork shares its source's history without copying it. A nil from is
// nothing to borrow.
func (r *Repo) Borrow(from *Repo) error {
	if from == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return writeAtomic(filepath.Join(r.dir, "objects", "info", "alternates"), []byte(filepath.Join(from.dir, "objects")+"\n"))
}

// MaxImportBytes bounds the files ReadCommit reads of one commit.
const MaxImportBytes = 256 << 20

// ReadCommit reads commit rev (a SHA, branch or tag) of the git
// repository at dir: its SHA and its files, every blob of its tree by
// path (executables and symbolic links read as their content;
// submodules left out). Files over MaxImportBytes in all are an error.
func ReadCommit(dir, rev string) (sha string, files map[string][]byte, err error) {
	out, err := gitCommand(dir, "rev-parse", "--verify", "--end-of-options", rev+"^{commit}").Output()
	if err != nil {
		return "", nil, fmt.Errorf("gitrepo: commit %q of %s: %w", rev, dir, gitError(err))
	}
	sha = strings.TrimSpace(string(out))
	out, err = gitCommand(dir, "ls-tree", "-r", "-z", "--end-of-options", sha).Output()
	if err != nil {
		return "", nil, fmt.Errorf("gitrepo: tree of %s in %s: %w", sha, dir, gitError(err))
	}
	seen := map[string]bool{}
	var order []string // the blobs, each once, for the batch below
	byPath := map[string]string{}
	for _, entry := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if entry == "" {
			continue
		}
		meta, path, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			return "", nil, fmt.Errorf("gitrepo: ls-tree of %s printed %q", sha, entry)
		}
		if fields[1] != "blob" {
			continue
		}
		byPath[path] = fields[2]
		if !seen[fields[2]] {
			seen[fields[2]] = true
			order = append(order, fields[2])
		}
	}
	cmd := gitCommand(dir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(order, "\n") + "\n")
	out, err = cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("gitrepo: blobs of %s in %s: %w", sha, dir, gitError(err))
	}
	blobs := make(map[string][]byte, len(order))
	total := 0
	for _, want := range order {
		header, rest, ok := bytes.Cut(out, []byte("\n"))
		var got, kind string
		var size int
		if ok {
			_, err = fmt.Sscanf(string(header), "%s %s %d", &got, &kind, &size)
		}
		if !ok || err != nil || got != want || kind != "blob" || size < 0 || size+1 > len(rest) {
			return "", nil, fmt.Errorf("gitrepo: cat-file of %s in %s printed %q", want, dir, header)
		}
		if total += size; total > MaxImportBytes {
			return "", nil, fmt.Errorf("gitrepo: the files of %s in %s are over %d bytes", sha, dir, MaxImportBytes)
		}
		blobs[want] = rest[:size]
		out = rest[size+1:]
	}
	files = make(map[string][]byte, len(byPath))
	for p, b := range byPath {
		files[p] = blobs[b]
	}
	return sha, files, nil
}

// FetchFrom copies into r the objects of commit sha of the git
// repository at dir, its history included, without changing r's refs.
func (r *Repo) FetchFrom(dir, sha string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, err := gitCommand(r.dir, "--git-dir", r.dir, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--upload-pack", "git -c uploadpack.allowAnySHA1InWant=true upload-pack", dir, sha).CombinedOutput()
	if err != nil {
		return fmt.Errorf("gitrepo: fetching %s from %s: %w: %s", sha, dir, err, out)
	}
	return nil
}

// gitError adds what git said on standard error to err.
func gitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
