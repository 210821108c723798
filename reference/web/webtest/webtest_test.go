package webtest_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/reference/web/webtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunPageWantDiff(t *testing.T) {
	page := &webtest.RunPage{
		State: "running",
		Nodes: []webtest.Node{
			{Job: "build", State: "succeeded", Critical: true},
			{Job: "test", State: "running", Critical: true},
			{Job: "lint", State: "failed"},
		},
		Edges: []webtest.Edge{{From: "build", To: "test", Critical: true}, {From: "build", To: "lint"}},
	}
	want := webtest.RunPageWant{
		State:        "running",
		Jobs:         map[string]string{"build": "succeeded", "test": "running", "lint": ""},
		Edges:        [][2]string{{"build", "test"}, {"build", "lint"}},
		CriticalPath: []string{"build", "test"},
	}
	if d := want.Diff(page); d != "" {
		t.Fatalf("a page as wanted differs: %s", d)
	}
	for _, tc := range []struct {
		name string
		edit func(w *webtest.RunPageWant)
		want []string
	}{
		{"run state", func(w *webtest.RunPageWant) { w.State = "failed" }, []string{`run state "running", want "failed"`}},
		{"job state", func(w *webtest.RunPageWant) { w.Jobs["test"] = "succeeded" }, []string{`node "test" is running, want succeeded`}},
		{"missing job", func(w *webtest.RunPageWant) { w.Jobs["deploy"] = "" }, []string{`no node "deploy"`}},
		{"extra job", func(w *webtest.RunPageWant) { delete(w.Jobs, "lint") }, []string{`unexpected node "lint"`}},
		{"missing edge", func(w *webtest.RunPageWant) { w.Edges = append(w.Edges, [2]string{"lint", "test"}) }, []string{"no edge lint → test"}},
		{"extra edge", func(w *webtest.RunPageWant) { w.Edges = w.Edges[:1] }, []string{"unexpected edge build → lint"}},
		{"critical path", func(w *webtest.RunPageWant) { w.CriticalPath = []string{"build", "lint"} }, []string{
			`node "lint" critical=false, want true`, `node "test" critical=true, want false`,
			"edge build → lint critical=false, want true", "edge build → test critical=true, want false"}},
		{"no highlight", func(w *webtest.RunPageWant) { w.CriticalPath = []string{} }, []string{
			`node "build" critical=true, want false`, "edge build → test critical=true, want false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := want
			w.Jobs = map[string]string{}
			for k, v := range want.Jobs {
				w.Jobs[k] = v
			}
			w.Edges = append([][2]string(nil), want.Edges...)
			tc.edit(&w)
			d := w.Diff(page)
			for _, s := range tc.want {
				if !strings.Contains(d, s) {
					t.Errorf("diff %q lacks %q", d, s)
				}
			}
		})
	}
}

func TestBrowserLeavesNoProcess(t *testing.T) {
	// Browser's own cleanup fails the test if a process of the browser
	// outlives it; this test opens a page so that there is a renderer too,
	// and checks that the processes are found while the browser runs (the
	// profile is a directory under the test's temporary root).
	ctx := webtest.Browser(t)
	root := filepath.Dir(t.TempDir())
	if pids := proctest.Containing(root); len(pids) == 0 {
		t.Fatalf("no process of the browser names its profile under %s", root)
	}
	p, err := webtest.Open(ctx, "about:blank")
	if err != nil {
		t.Fatal(err)
	}
	var two int
	if err := p.Eval(`1 + 1`, &two); err != nil || two != 2 {
		t.Fatalf("1 + 1 = %d (%v)", two, err)
	}
	p.Close()
}

func TestPageRecordsExceptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(webtest.Browser(t), 30*time.Second)
	defer cancel()
	p, err := webtest.Open(ctx, `data:text/html,<p>x</p><script>Promise.reject(new Error("rejected")); throw new Error("boom");</script>`)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Both are reported soon; the deadline ends the wait otherwise.
	for len(p.Exceptions()) < 2 {
		if err := p.Eval(`0`, new(int)); err != nil {
			t.Fatalf("%v; exceptions so far: %q", err, p.Exceptions())
		}
	}
	ex := strings.Join(p.Exceptions(), "\n")
	if !strings.Contains(ex, "boom") || !strings.Contains(ex, "rejected") {
		t.Errorf("exceptions %q, want boom and rejected", ex)
	}
}
