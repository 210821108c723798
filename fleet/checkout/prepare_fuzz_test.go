package checkout

import (
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cikit/cikit"
)

// FuzzPrepare: a request prepare accepts checks out inside its workspace,
// from an http(s) URL without credentials, and hands git only a full SHA,
// HEAD or a name git itself accepts as a ref — never an option.
func FuzzPrepare(f *testing.F) {
	for _, s := range [][5]string{
		{"", "", "", "refs/heads/main", "http://h/acme/api.git"},
		{"v1", "sub/dir", "", "refs/tags/v1", "https://h/git/acme/api.git"},
		{"--upload-pack=x", "../x", "../etc", "refs/heads/-x", "file:///etc"},
		{"main~1", "/abs", "acme/tools", "", "http://u:p@h/acme/api.git"},
		{"refs/heads/x", "a/./b", "acme/-x", "refs/heads/x", "http://h/acme/api.git?x=1"},
		{"a..b", "a\\b", "acme/tools", "refs/pull/1/head", "https://h/acme/api"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	git, err := exec.LookPath("git")
	if err != nil {
		f.Fatalf("git is required: %v", err)
	}
	const dir = "/ws"
	const sha = "0123456789abcdef0123456789abcdef01234567"
	f.Fuzz(func(t *testing.T, ref, p, repository, runRef, rawURL string) {
		tg, err := prepare(Request{
			Source: &cikit.CheckoutSource{URL: rawURL}, Repository: "acme/api", SHA: sha, Ref: runRef, Dir: dir,
			Options: cikit.Checkout{Ref: ref, Path: p, Repository: repository},
		})
		if err != nil {
			return
		}
		if tg.dir != dir && !strings.HasPrefix(tg.dir, dir+"/") || filepath.Clean(tg.dir) != tg.dir {
			t.Fatalf("work tree %q is not inside %s", tg.dir, dir)
		}
		u, err := url.Parse(tg.url)
		if err != nil || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
			t.Fatalf("URL %q: %v", tg.url, err)
		}
		if strings.HasPrefix(tg.want, "-") || strings.HasPrefix(tg.branch, "-") {
			t.Fatalf("want %q or branch %q reads as an option", tg.want, tg.branch)
		}
		if !tg.isSHA && tg.want != "HEAD" {
			if out, err := exec.Command(git, "check-ref-format", "--allow-onelevel", tg.want).CombinedOutput(); err != nil {
				t.Fatalf("want %q, which git refuses as a ref: %s", tg.want, out)
			}
		}
		if tg.branch != "" {
			if out, err := exec.Command(git, "check-ref-format", "--branch", tg.branch).CombinedOutput(); err != nil {
				t.Fatalf("branch %q, which git refuses: %s", tg.branch, out)
			}
		}
	})
}
