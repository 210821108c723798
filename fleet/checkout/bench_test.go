package checkout_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/fleet/checkout"
	"github.com/cikit/cikit/vcs/gitserve"
	"github.com/cikit/cikit/vcs/gitserve/gitservetest"
)

const (
	benchCommits = 5000
	benchFiles   = 2000
)

// generate fills the empty bare repository at dir with benchCommits
// commits on main: the first adds benchFiles files in 40 directories,
// each later one changes one file. It goes through git fast-import, which
// writes the 5,000 commits in a second or two.
func generate(b *testing.B, dir string) {
	b.Helper()
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = append([]string{"GIT_DIR=" + dir}, gitservetest.Env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(in)
	file := func(i int) string { return fmt.Sprintf("pkg%02d/file%04d.go", i%40, i) }
	content := func(i, rev int) string {
		return fmt.Sprintf("package pkg%02d\n\n// File %d, revision %d.\nfunc F%d() int { return %d }\n%s\n",
			i%40, i, rev, i, rev, strings.Repeat("// padding to a typical source file's size\n", 20))
	}
	for c := range benchCommits {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter cikit <cikit@example.com> %d +0000\n", 1_700_000_000+c)
		msg := fmt.Sprintf("commit %d", c)
		fmt.Fprintf(w, "data %d\n%s\n", len(msg), msg)
		if c == 0 {
			for i := range benchFiles {
				data := content(i, 0)
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", file(i), len(data), data)
			}
		} else {
			i := (c * 7919) % benchFiles
			data := content(i, c)
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", file(i), len(data), data)
		}
		w.WriteString("\n")
	}
	flushErr := w.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil || flushErr != nil {
		b.Fatalf("git fast-import: %v: %s", err, stderr.String())
	}
}

// counting counts the bytes a handler answers: what travels to the
// runner.
type counting struct {
	h     http.Handler
	bytes atomic.Int64
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.h.ServeHTTP(&countingWriter{ResponseWriter: w, n: &c.bytes}, r)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func (w *countingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// BenchmarkCheckout checks out a repository of 5,000 commits and 2,000
// files served by gitserve: cold (an empty cache, shallow and with all
// history) and warm (one new commit after a first checkout, into a new
// workspace as every job gets). It reports the objects the cache received and the bytes
// the server sent per checkout: warm moves only the new commit's objects.
func BenchmarkCheckout(b *testing.B) {
	repos := gitservetest.NewRepos(b)
	repos.Create(b, repo, "main")
	generate(b, repos.Dir(repo))
	h, err := gitserve.New(gitserve.Config{Root: repos.Root, Authorize: authorize})
	if err != nil {
		b.Fatal(err)
	}
	wire := &counting{h: h}
	srv := httptest.NewServer(wire)
	b.Cleanup(srv.Close)
	src := &cikit.CheckoutSource{URL: srv.URL + "/" + repo + ".git", Username: user, Token: token}
	head := func() string { return gitservetest.Git(b, repos.Dir(repo), "", nil, "rev-parse", "refs/heads/main") }
	ctx := context.Background()

	cold := func(depth int) func(b *testing.B) {
		return func(b *testing.B) {
			sha := head()
			var objects, bytes int64
			for b.Loop() {
				c, err := checkout.New(checkout.Config{CacheDir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				before := wire.bytes.Load()
				res, err := c.Checkout(ctx, checkout.Request{Source: src, Repository: repo, SHA: sha, Ref: "refs/heads/main",
					Dir: b.TempDir(), Options: cikit.Checkout{Depth: depth}})
				if err != nil {
					b.Fatal(err)
				}
				objects += res.Fetched
				bytes += wire.bytes.Load() - before
			}
			b.ReportMetric(float64(objects)/float64(b.N), "objects/op")
			b.ReportMetric(float64(bytes)/float64(b.N), "wire-B/op")
		}
	}
	b.Run("cold", cold(0))
	b.Run("cold-full-history", cold(-1))

	b.Run("warm", func(b *testing.B) {
		c, err := checkout.New(checkout.Config{CacheDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		req := checkout.Request{Source: src, Repository: repo, SHA: head(), Ref: "refs/heads/main", Dir: b.TempDir()}
		if _, err := c.Checkout(ctx, req); err != nil {
			b.Fatal(err)
		}
		var objects, bytes int64
		n := 0
		for b.Loop() {
			b.StopTimer()
			n++
			req.SHA = repos.Commit(b, repo, "main", map[string]string{fmt.Sprintf("pkg%02d/file%04d.go", n%40, n): fmt.Sprintf("package pkg // warm %d\n", n)})
			// A new workspace, as the executor gives every job.
			req.Dir = b.TempDir()
			before := wire.bytes.Load()
			b.StartTimer()
			res, err := c.Checkout(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if res.Fetched != 4 {
				b.Fatalf("warm checkout fetched %d objects, want 4: the commit, two trees and a blob", res.Fetched)
			}
			objects += res.Fetched
			bytes += wire.bytes.Load() - before
		}
		b.ReportMetric(float64(objects)/float64(b.N), "objects/op")
		b.ReportMetric(float64(bytes)/float64(b.N), "wire-B/op")
	})
}
