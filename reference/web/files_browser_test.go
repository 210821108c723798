package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/web/webtest"
)

// TestArtifactsAndCacheHits: the run page's graph shows each job's cache
// hits on its node; the job page lists its caches (an exact hit, a
// restore-key hit that saved anew, a miss) and its artifacts, whose link
// downloads the artifact's bytes through the API's redirect.
func TestArtifactsAndCacheHits(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.cikit.yml", pipeline()...)
	f.at(0)
	f.queue(run, "build")
	f.start(run, "build")
	f.at(1)
	f.succeedWith(run, "build", &dag.JobResult{Caches: []cikit.CacheReport{
		{Key: "go-mod-1f2e", Hit: true, Exact: true, MatchedKey: "go-mod-1f2e", RestoredInMS: 120, Size: 2048, Note: "exact hit"},
		{Key: "npm-9a8b", Hit: true, MatchedKey: "npm-", RestoredInMS: 80, Size: 1024, Saved: true, SavedSize: 4096},
	}})
	f.addArtifact(run, "build", "dist", "the bytes build made\n")
	f.queue(run, "unit")
	f.start(run, "unit")
	f.succeedWith(run, "unit", &dag.JobResult{Caches: []cikit.CacheReport{{Key: "pytest-3", Saved: true, SavedSize: 512}}})

	ctx := browse(t)
	p := open(t, ctx, webtest.RunURL(f.url, run))
	type node struct {
		Hits  string `json:"hits"`
		Title string `json:"title"`
	}
	nodes := func() (map[string]node, error) {
		var got map[string]node
		err := p.Eval(`Object.fromEntries([...document.querySelectorAll('[data-testid="dag-node"]')].map((n) =>
			[n.dataset.job, {hits: n.getAttribute('data-cache-hits') || '', title: n.querySelector('title')?.textContent || ''}]))`, &got)
		return got, err
	}
	if err := waitFor(ctx, func() error {
		got, err := nodes()
		if err != nil {
			return err
		}
		if got["build"].Hits != "2" || got["unit"].Hits != "0" {
			return fmt.Errorf("cache hits on the nodes %+v, want build 2, unit 0", got)
		}
		if !strings.Contains(got["build"].Title, "cache go-mod-1f2e: hit; npm-9a8b: restored from npm-") ||
			!strings.Contains(got["unit"].Title, "cache pytest-3: miss") {
			return fmt.Errorf("node titles %+v", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	p = open(t, ctx, webtest.JobURL(f.url, run, "build"))
	for _, want := range []string{"go-mod-1f2e: hit · 2.0 KiB in 120 ms · exact hit", "npm-9a8b: restored from npm- · 1.0 KiB in 80 ms · saved 4.0 KiB"} {
		if err := p.WaitText("job-caches", want); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitText("job-artifacts", "dist · 21 B · sha256 "); err != nil {
		t.Fatal(err)
	}
	var link struct {
		Href     string `json:"href"`
		Download string `json:"download"`
	}
	// A synchronous request follows the API's redirect to the blob, as
	// the browser does when the link is clicked.
	if err := p.Eval(`(() => {
		const a = document.querySelector('[data-testid="artifact-link"]');
		const x = new XMLHttpRequest();
		x.open('GET', a.href, false);
		x.send();
		return {href: a.getAttribute('href'), download: x.status + ' ' + x.responseText};
	})()`, &link); err != nil {
		t.Fatal(err)
	}
	if want := api.Prefix + "/runs/" + run + "/artifacts/art-1/download"; link.Href != want {
		t.Errorf("the artifact links to %q, want %q", link.Href, want)
	}
	if link.Download != "200 the bytes build made\n" {
		t.Errorf("following the link gave %q", link.Download)
	}

	p = open(t, ctx, webtest.JobURL(f.url, run, "unit"))
	if err := p.WaitText("job-caches", "pytest-3: miss · saved 512 B"); err != nil {
		t.Fatal(err)
	}
}
