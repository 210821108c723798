package local

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/internal/gitdir"
)

// DefaultGit is the git executable a Provider runs unless Config.Git
// names another, looked up in PATH.
const DefaultGit = "git"

// Config configures a Provider.
type Config struct {
	// Root is the directory the repositories are under.
	Root string
	// Git is the git executable; DefaultGit when empty.
	Git string
}

// Provider is a vcs.Provider over the git repositories under a root
// directory. It is safe for concurrent use.
type Provider struct {
	root string
	git  string
	env  []string

	mu       sync.Mutex
	pulls    map[string][]*vcs.PullRequest    // repo -> pull requests, number-1
	statuses map[string]map[string]vcs.Status // "repo@sha" -> context -> latest
}

var (
	_ vcs.Provider   = (*Provider)(nil)
	_ vcs.FileLister = (*Provider)(nil)
)

// New returns a Provider over the repositories under cfg.Root.
func New(cfg Config) (*Provider, error) {
	root, git, err := gitdir.Open(cfg.Root, cmp.Or(cfg.Git, DefaultGit))
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return &Provider{
		root:     root,
		git:      git,
		env:      gitdir.Env("GIT_LITERAL_PATHSPECS=1", "GIT_ATTR_NOSYSTEM=1"),
		pulls:    map[string][]*vcs.PullRequest{},
		statuses: map[string]map[string]vcs.Status{},
	}, nil
}

// gitDir returns the git directory of repo: <root>/repo/.git, or
// <root>/repo itself when it is bare.
func (p *Provider) gitDir(repo string) (string, error) {
	if err := gitdir.CheckRepo(repo); err != nil {
		return "", fmt.Errorf("local: %w", err)
	}
	if dir, ok := gitdir.Find(p.root, repo); ok {
		return dir, nil
	}
	return "", fmt.Errorf("local: repository %s: %w", repo, vcs.ErrNotFound)
}

// run runs git on the git directory dir with stdin, returning its
// standard output. A failure carries git's standard error, or the
// context's error when that ended it.
func (p *Provider) run(ctx context.Context, dir string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, p.git, args...)
	cmd.Env = append(slices.Clip(p.env), "GIT_DIR="+dir)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("local: git %s: %w", args[0], context.Cause(ctx))
		}
		return nil, fmt.Errorf("local: git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// object is what `git cat-file --batch-check` says of an object name.
type object struct {
	oid, typ string
	size     int64
}

// lookup asks git for the objects names name, one each; a missing one
// has an empty oid. The names go through standard input, where nothing is
// an option.
func (p *Provider) lookup(ctx context.Context, dir string, names ...string) ([]object, error) {
	var in bytes.Buffer
	for _, n := range names {
		in.WriteString(n)
		in.WriteByte('\n')
	}
	out, err := p.run(ctx, dir, in.Bytes(), "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("local: git cat-file answered %d lines for %d names", len(lines), len(names))
	}
	objs := make([]object, len(names))
	for i, line := range lines {
		oid, rest, _ := strings.Cut(line, " ")
		typ, size, _ := strings.Cut(rest, " ")
		if isSHA(oid) {
			n, err := strconv.ParseInt(size, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("local: git cat-file answered %q", line)
			}
			objs[i] = object{oid: oid, typ: typ, size: n}
		}
	}
	return objs, nil
}

// commit checks that sha is a commit of repo, returning repo's git
// directory.
func (p *Provider) commit(ctx context.Context, repo, sha string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if !isSHA(sha) {
		return "", fmt.Errorf("local: %q is not a full commit SHA", sha)
	}
	dir, err := p.gitDir(repo)
	if err != nil {
		return "", err
	}
	objs, err := p.lookup(ctx, dir, sha+"^{commit}")
	if err != nil {
		return "", err
	}
	if objs[0].oid == "" {
		return "", fmt.Errorf("local: commit %s of %s: %w", sha, repo, vcs.ErrNotFound)
	}
	return dir, nil
}

// ReadFile returns a file of repo at commit sha, a full SHA.
func (p *Provider) ReadFile(ctx context.Context, repo, sha, path string) ([]byte, error) {
	return p.ReadFileMax(ctx, repo, sha, path, -1)
}

// ReadFileMax is ReadFile of a file of at most max bytes (vcs.MaxReader);
// a larger one is refused from its size in the object store, unread.
// A negative max is no bound.
func (p *Provider) ReadFileMax(ctx context.Context, repo, sha, path string, max int64) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	dir, err := p.commit(ctx, repo, sha)
	if err != nil {
		return nil, err
	}
	objs, err := p.lookup(ctx, dir, sha+":"+path)
	if err != nil {
		return nil, err
	}
	if objs[0].typ != "blob" {
		return nil, fmt.Errorf("local: %s at %s of %s: %w", path, sha, repo, vcs.ErrNotFound)
	}
	if max >= 0 && objs[0].size > max {
		return nil, &vcs.FileTooLargeError{Path: path, Size: objs[0].size, Max: max}
	}
	return p.run(ctx, dir, nil, "cat-file", "blob", objs[0].oid)
}

// ReadDir returns the names of the files directly in dir of repo at
// commit sha, a full SHA. Symbolic links are files; subdirectories and
// submodules are not listed. A directory holding only directories is an
// empty list.
func (p *Provider) ReadDir(ctx context.Context, repo, sha, dir string) ([]string, error) {
	return p.lsTree(ctx, repo, sha, dir)
}

// lsTree returns the paths, relative to dir, of the files (blobs) `git
// ls-tree` with flags lists in directory dir of repo at commit sha,
// sorted; a dir that is no directory there is not found.
func (p *Provider) lsTree(ctx context.Context, repo, sha, dir string, flags ...string) ([]string, error) {
	if dir != "" {
		if err := checkPath(dir); err != nil {
			return nil, err
		}
	}
	gitDir, err := p.commit(ctx, repo, sha)
	if err != nil {
		return nil, err
	}
	objs, err := p.lookup(ctx, gitDir, sha+"^{commit}:"+dir)
	if err != nil {
		return nil, err
	}
	if objs[0].typ != "tree" {
		return nil, fmt.Errorf("local: directory %s at %s of %s: %w", dir, sha, repo, vcs.ErrNotFound)
	}
	out, err := p.run(ctx, gitDir, nil, append(append([]string{"ls-tree", "-z", "--full-tree"}, flags...), objs[0].oid)...)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for entry := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "<mode> SP <type> SP <oid> TAB <path>"
		meta, name, ok := strings.Cut(entry, "\t")
		if fields := strings.Fields(meta); ok && len(fields) == 3 && fields[1] == "blob" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// ListFiles returns the paths of the files below dir of repo at commit
// sha, a full SHA, at any depth, sorted (vcs.FileLister). Symbolic links
// are files; submodules are not listed.
func (p *Provider) ListFiles(ctx context.Context, repo, sha, dir string, max int) ([]string, error) {
	files, err := p.lsTree(ctx, repo, sha, dir, "-r")
	if err != nil {
		return nil, err
	}
	if dir != "" {
		// Sorted still: the same prefix on every path.
		for i, f := range files {
			files[i] = dir + "/" + f
		}
	}
	return vcs.CapFiles(files, max)
}

// ResolveRef returns the commit a branch or tag of repo points at. A
// short name is looked up as a branch first, then as a tag; a full name
// ("refs/tags/v1.0.0") as it is. An annotated tag resolves to its commit.
func (p *Provider) ResolveRef(ctx context.Context, repo, ref string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := checkRef(ref); err != nil {
		return "", err
	}
	dir, err := p.gitDir(repo)
	if err != nil {
		return "", err
	}
	return p.resolveRef(ctx, dir, repo, ref)
}

func (p *Provider) resolveRef(ctx context.Context, dir, repo, ref string) (string, error) {
	names := []string{ref + "^{commit}"}
	if !strings.HasPrefix(ref, "refs/") {
		names = []string{"refs/heads/" + ref + "^{commit}", "refs/tags/" + ref + "^{commit}"}
	}
	objs, err := p.lookup(ctx, dir, names...)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if o.oid != "" {
			return o.oid, nil
		}
	}
	return "", fmt.Errorf("local: ref %s of %s: %w", ref, repo, vcs.ErrNotFound)
}

// DefaultBranch returns the branch repo's HEAD names.
func (p *Provider) DefaultBranch(ctx context.Context, repo string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	dir, err := p.gitDir(repo)
	if err != nil {
		return "", err
	}
	out, err := p.run(ctx, dir, nil, "symbolic-ref", "--quiet", "HEAD")
	if err != nil {
		return "", fmt.Errorf("local: HEAD of %s names no branch: %w", repo, err)
	}
	branch, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "refs/heads/")
	if !ok {
		return "", fmt.Errorf("local: HEAD of %s is %s, not a branch", repo, out)
	}
	return branch, nil
}

// ChangedFiles returns what `git diff --name-only --no-renames
// base...head` lists: the files head changes since the merge base, a
// rename as its two paths. Base and head are full commit SHAs or refs as
// ResolveRef takes them.
func (p *Provider) ChangedFiles(ctx context.Context, repo, base, head string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir, err := p.gitDir(repo)
	if err != nil {
		return nil, err
	}
	if base, err = p.rev(ctx, dir, repo, base); err != nil {
		return nil, err
	}
	if head, err = p.rev(ctx, dir, repo, head); err != nil {
		return nil, err
	}
	out, err := p.run(ctx, dir, nil, "diff", "--name-only", "--no-renames", "--no-ext-diff", "--no-textconv", "-z",
		"--end-of-options", base+"..."+head, "--")
	if err != nil {
		return nil, err
	}
	paths := []string{}
	for f := range strings.SplitSeq(string(out), "\x00") {
		if f != "" {
			paths = append(paths, f)
		}
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// rev returns the commit rev names: a full SHA of a commit, or a ref.
func (p *Provider) rev(ctx context.Context, dir, repo, rev string) (string, error) {
	if !isSHA(rev) {
		if err := checkRef(rev); err != nil {
			return "", err
		}
		return p.resolveRef(ctx, dir, repo, rev)
	}
	objs, err := p.lookup(ctx, dir, rev+"^{commit}")
	if err != nil {
		return "", err
	}
	if objs[0].oid == "" {
		return "", fmt.Errorf("local: commit %s of %s: %w", rev, repo, vcs.ErrNotFound)
	}
	return objs[0].oid, nil
}
