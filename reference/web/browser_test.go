package web_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/reference/api"
	"github.com/cikit/cikit/reference/web/webtest"
)

// browse starts a browser and returns a context of it that ends with a
// deadline, so that no wait of a failing test lasts forever.
func browse(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(webtest.Browser(t), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, ctx context.Context, url string) *webtest.Page {
	t.Helper()
	p, err := webtest.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ex := p.Exceptions(); len(ex) > 0 {
			t.Errorf("%s threw: %q", url, ex)
		}
		p.Close()
	})
	return p
}

// pipeline is build → [unit, lint (allowed to fail), e2e] → deploy.
func pipeline() []*cikit.JobSpec {
	return []*cikit.JobSpec{
		{ID: "build", Name: "build"},
		{ID: "unit", Name: "unit tests", Needs: []string{"build"}},
		{ID: "lint", Name: "lint", Needs: []string{"build"}, AllowFailure: true},
		{ID: "e2e", Name: "end-to-end", Needs: []string{"build"}, RunsOn: []string{"linux"}},
		{ID: "deploy", Name: "deploy", Needs: []string{"unit", "lint", "e2e"}},
	}
}

var pipelineEdges = [][2]string{{"build", "unit"}, {"build", "lint"}, {"build", "e2e"}, {"unit", "deploy"}, {"lint", "deploy"}, {"e2e", "deploy"}}

func TestRunPage(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.cikit.yml", pipeline()...)
	f.at(0)
	f.queue(run, "build")
	f.start(run, "build")
	f.at(2)
	f.succeed(run, "build")
	for _, j := range []string{"unit", "lint", "e2e"} {
		f.queue(run, j)
		f.start(run, j)
	}
	f.at(3)
	f.succeed(run, "unit")
	f.at(4)
	f.fail(run, "lint")
	f.at(10)
	var d api.RunDetail
	if err := f.getJSON(api.Prefix+"/runs/"+run, &d); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.CriticalPath, []string{"build", "e2e"}) {
		t.Fatalf("the API's critical path %v, want build → e2e (the test's premise)", d.CriticalPath)
	}

	ctx := browse(t)
	p := open(t, ctx, webtest.RunURL(f.url, run))
	before, err := p.WaitRun(webtest.RunPageWant{
		State: "running",
		Jobs: map[string]string{"build": "succeeded", "unit": "succeeded", "lint": "failed", "e2e": "running",
			"deploy": "pending"},
		Edges:        pipelineEdges,
		CriticalPath: d.CriticalPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range before.Nodes {
		// A failure that is allowed looks unlike a hard one.
		if n.Job == "lint" && !strings.Contains(n.Class, "state-failed-allowed") {
			t.Errorf("lint, failed with allow_failure, has class %q", n.Class)
		}
	}
	// Layers: build, then its three dependents, then deploy.
	x := make(map[string]float64)
	for _, n := range before.Nodes {
		x[n.Job] = n.X
	}
	if !(x["build"] < x["unit"] && x["unit"] == x["lint"] && x["lint"] == x["e2e"] && x["e2e"] < x["deploy"]) {
		t.Errorf("node columns %v, want build < unit = lint = e2e < deploy", x)
	}

	// The store moves on; the page follows without a reload and keeps
	// every node where it was.
	if err := p.Eval(`window.notReloaded = true`, new(bool)); err != nil {
		t.Fatal(err)
	}
	f.at(12)
	f.succeed(run, "e2e")
	f.queue(run, "deploy")
	f.start(run, "deploy")
	f.at(13)
	after, err := p.WaitRun(webtest.RunPageWant{
		State: "running",
		Jobs: map[string]string{"build": "succeeded", "unit": "succeeded", "lint": "failed", "e2e": "succeeded",
			"deploy": "running"},
		Edges:        pipelineEdges,
		CriticalPath: []string{"build", "e2e", "deploy"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var kept bool
	if err := p.Eval(`window.notReloaded === true`, &kept); err != nil || !kept {
		t.Errorf("the page was reloaded (%v)", err)
	}
	for i, n := range after.Nodes {
		if b := before.Nodes[i]; n.Job != b.Job || n.X != b.X || n.Y != b.Y {
			t.Errorf("node %s moved from (%v,%v) to %s at (%v,%v)", b.Job, b.X, b.Y, n.Job, n.X, n.Y)
		}
	}

	// Cancel: a refusal shows its error; then a cancel that succeeds.
	f.refuseNextPost("refused by the test")
	const cancel = `[data-testid="cancel"]:not([disabled])`
	if err := p.Click(cancel); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("error", "refused by the test"); err != nil {
		t.Fatal(err)
	}
	want := api.Prefix + "/runs/" + run + "/cancel"
	if got := f.refusedPosts(); !slices.Equal(got, []string{want}) {
		t.Fatalf("refused POSTs %q, want %q", got, want)
	}
	if s, err := f.jobState(run, "deploy"); err != nil || s != cikit.JobRunning {
		t.Fatalf("after the refused cancel deploy is %s (%v), want running", s, err)
	}
	if err := p.Click(cancel); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		if s, err := f.jobState(run, "deploy"); err != nil || s != cikit.JobCancelRequested {
			return fmt.Errorf("deploy is %s (%v) in the store, want cancel_requested", s, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The running job is asked to stop; the page shows it.
	cancelled := webtest.RunPageWant{
		Jobs: map[string]string{"build": "succeeded", "unit": "succeeded", "lint": "failed", "e2e": "succeeded",
			"deploy": "cancel_requested"},
		Edges:        pipelineEdges,
		CriticalPath: []string{"build", "e2e", "deploy"},
	}
	if _, err := p.WaitRun(cancelled); err != nil {
		t.Fatal(err)
	}
	if page, err := p.Run(); err != nil || page.Error != "" {
		t.Errorf("after a cancel that succeeded the page shows error %q (%v)", page.Error, err)
	}

	// A job's box leads to its page.
	if err := p.Click(`[data-testid="dag-node"][data-job="e2e"] rect`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitPath("/runs/" + run + "/jobs/e2e"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("job-state", "succeeded"); err != nil {
		t.Fatal(err)
	}

	// The exported check sees the same run.
	if err := webtest.CheckRunPage(ctx, f.url, run, cancelled); err != nil {
		t.Fatal(err)
	}
}

// waitFor calls check until it returns nil or ctx ends.
func waitFor(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestRunsPage(t *testing.T) {
	f := newPlatform(t)
	var ids []string
	for i := range 30 {
		f.at(i)
		ids = append(ids, f.create(fmt.Sprintf("acme/p%d:.cikit.yml", i), &cikit.JobSpec{ID: "build"}))
	}
	slices.Reverse(ids)
	ctx := browse(t)
	p := open(t, ctx, f.url+"/")
	rows := func(want []string) error {
		return waitFor(ctx, func() error {
			var got []string
			if err := p.Eval(`[...document.querySelectorAll('[data-testid="run-row"]')].map((r) => r.dataset.run)`, &got); err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("rows %v, want %v", got, want)
			}
			return nil
		})
	}
	if err := rows(ids[:25]); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(`[data-testid="next"]`); err != nil {
		t.Fatal(err)
	}
	if err := rows(ids[25:]); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(`.pager a[href="/"]`); err != nil {
		t.Fatal(err)
	}
	if err := rows(ids[:25]); err != nil {
		t.Fatal(err)
	}
	// A new run shows up on its own.
	f.at(40)
	newest := f.create("acme/new:.cikit.yml", &cikit.JobSpec{ID: "build"})
	if err := rows(append([]string{newest}, ids[:24]...)); err != nil {
		t.Fatal(err)
	}
}

// TestRunPageAnnotations: the run page lists the annotations of all its
// jobs, with the file and line they name, each linking to its job's page,
// which lists them too.
func TestRunPageAnnotations(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.github/workflows/ci.yml",
		&cikit.JobSpec{ID: "build", Name: "build"},
		&cikit.JobSpec{ID: "lint", Name: "lint"},
		&cikit.JobSpec{ID: "test", Name: "test", Needs: []string{"build"}})
	for _, j := range []string{"build", "lint"} {
		f.queue(run, j)
		f.start(run, j)
	}
	f.succeedWith(run, "build", &dag.JobResult{Annotations: []cikit.Annotation{
		{Level: "error", Message: "undefined: x", File: "src/app.go", Line: 12, Col: 3, Step: "compile"},
		{Level: "notice", Message: "cache hit"},
	}})
	f.succeedWith(run, "lint", &dag.JobResult{Annotations: []cikit.Annotation{
		{Level: "warning", Title: "Deprecated", Message: "use Y", File: "lib/old.go", Line: 4},
	}})

	ctx := browse(t)
	p := open(t, ctx, webtest.RunURL(f.url, run))
	want := []webtest.Annotation{
		{Level: "error", Job: "build", File: "src/app.go", Line: 12, Text: "error in build (compile): src/app.go:12:3 undefined: x",
			Link: "/runs/" + run + "/jobs/build"},
		{Level: "notice", Job: "build", Text: "notice in build: cache hit", Link: "/runs/" + run + "/jobs/build"},
		{Level: "warning", Job: "lint", File: "lib/old.go", Line: 4, Text: "warning in lint: lib/old.go:4 Deprecated — use Y",
			Link: "/runs/" + run + "/jobs/lint"},
	}
	if err := waitFor(ctx, func() error {
		got, err := p.RunAnnotations()
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("annotations\n%+v\nwant\n%+v", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(`[data-testid="run-annotation"][data-job="lint"] a`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitPath("/runs/" + run + "/jobs/lint"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("annotations", "warning: lib/old.go:4: Deprecated — use Y"); err != nil {
		t.Fatal(err)
	}

	// A run without annotations shows no list.
	quiet := f.create("acme/api:.cikit.yml", &cikit.JobSpec{ID: "build"})
	q := open(t, ctx, webtest.RunURL(f.url, quiet))
	if _, err := q.WaitRun(webtest.RunPageWant{Jobs: map[string]string{"build": ""}}); err != nil {
		t.Fatal(err)
	}
	if got, err := q.RunAnnotations(); err != nil || len(got) != 0 {
		t.Errorf("a run without annotations lists %+v (%v)", got, err)
	}
}

// TestJobPageShowsTheImage: a job's page shows, beside the commit it
// checked out, the image it ran in as "reference @ digest", the digest
// shortened and whole in its tooltip; a reference pinned to its digest
// names it once, and a job on the host shows no image.
func TestJobPageShowsTheImage(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.cikit.yml", &cikit.JobSpec{ID: "build"}, &cikit.JobSpec{ID: "pinned"}, &cikit.JobSpec{ID: "host"})
	for _, j := range []string{"build", "pinned", "host"} {
		f.queue(run, j)
		f.start(run, j)
	}
	const commit = "89abcdef0123456789abcdef0123456789abcdef"
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	f.succeedWith(run, "build", &dag.JobResult{Commit: commit, ImageRef: "alpine:3.19", ImageDigest: digest})
	f.succeedWith(run, "pinned", &dag.JobResult{ImageRef: "registry.example:5000/acme/build@" + digest, ImageDigest: digest})
	f.succeedWith(run, "host", &dag.JobResult{Commit: commit})

	ctx := browse(t)
	image := func(p *webtest.Page, want string) {
		t.Helper()
		if err := p.WaitText("job-image", want); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Text  string `json:"text"`
			Title string `json:"title"`
		}
		if err := p.Eval(`(() => { const e = document.querySelector('[data-testid="job-image"]');
			return {text: e.textContent, title: e.querySelector('[title]')?.title || ''}; })()`, &got); err != nil {
			t.Fatal(err)
		}
		if got.Text != want || got.Title != digest {
			t.Errorf("the image shows %q with tooltip %q, want %q with %q", got.Text, got.Title, want, digest)
		}
	}
	p := open(t, ctx, webtest.JobURL(f.url, run, "build"))
	if err := p.WaitText("job-commit", commit); err != nil {
		t.Fatal(err)
	}
	image(p, "alpine:3.19 @ sha256:0123456789ab…")
	image(open(t, ctx, webtest.JobURL(f.url, run, "pinned")), "registry.example:5000/acme/build @ sha256:0123456789ab…")

	p = open(t, ctx, webtest.JobURL(f.url, run, "host"))
	if err := p.WaitText("job-commit", commit); err != nil {
		t.Fatal(err)
	}
	var shown bool
	if err := p.Eval(`document.querySelector('[data-testid="job-image"]') !== null`, &shown); err != nil {
		t.Fatal(err)
	}
	if shown {
		t.Error("a job on the host shows an image")
	}
}
