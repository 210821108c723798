package gitserve

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParsePath: a URL path parsePath accepts names a repository that
// stays under the root — no part is empty, "." or "..", starts with '-'
// (an option to git) or holds anything but letters, digits, '.', '_' and
// '-' — and a service the handler knows.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/acme/api.git/info/refs", "/acme/api/git-upload-pack", "/acme/api/git-receive-pack",
		"/acme/../etc/info/refs", "/../../x/info/refs", "/acme//api/info/refs", "/acme/-u/info/refs",
		"/acme/api/HEAD", "/acme/api/objects/pack/x.pack", "acme/api/info/refs", "/a/b/c.git/info/refs",
		"/acme/.git/info/refs", "/acme/a\x00b/git-upload-pack", "/acme/api.git.git/info/refs", "/",
	} {
		f.Add(s)
	}
	const root = "/srv/git"
	f.Fuzz(func(t *testing.T, p string) {
		req, ok, err := parsePath(p)
		if !ok || err != nil {
			return
		}
		switch req.service {
		case "info/refs", "git-upload-pack", "git-receive-pack", "dumb":
		default:
			t.Fatalf("%q: unknown service %q", p, req.service)
		}
		dir := filepath.Join(root, filepath.FromSlash(req.repo))
		if !strings.HasPrefix(dir, root+"/") || filepath.Clean(dir) != dir || dir != root+"/"+req.repo {
			t.Fatalf("%q: repository %q leaves the root or is not clean: %s", p, req.repo, dir)
		}
		parts := strings.Split(req.repo, "/")
		if len(parts) < 2 {
			t.Fatalf("%q: repository %q is not org/name", p, req.repo)
		}
		for _, part := range parts {
			if part == "" || part == "." || part == ".." || part[0] == '-' || part[0] == '.' {
				t.Fatalf("%q: repository %q has part %q", p, req.repo, part)
			}
			if strings.ContainsFunc(part, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r))
			}) {
				t.Fatalf("%q: repository %q has part %q with another character", p, req.repo, part)
			}
		}
	})
}
