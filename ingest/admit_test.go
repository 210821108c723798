package ingest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/status"
)

// admitCall is one call of IngesterConfig.Admit, as the test saw it.
type admitCall struct {
	ev    *ingest.Event
	run   *dag.RunCreateParams
	facts ingest.AdmitFacts
}

// admitter is an IngesterConfig.Admit that records its calls and
// answers with decide.
type admitter struct {
	mu     sync.Mutex
	calls  []admitCall
	decide func(run *dag.RunCreateParams, facts ingest.AdmitFacts) error
}

func (a *admitter) admit(_ context.Context, ev *ingest.Event, run *dag.RunCreateParams, facts ingest.AdmitFacts) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, admitCall{ev: ev, run: run, facts: facts})
	if a.decide == nil {
		return nil
	}
	return a.decide(run, facts)
}

func (a *admitter) seen() []admitCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]admitCall(nil), a.calls...)
}

type admitFixture struct {
	in    *ingest.Ingester
	vcs   *vcs.Memory
	dag   dag.Store
	admit *admitter
	// statuses is nil unless the fixture was asked for one.
	statuses *status.Reporter
}

// admitStores are the run stores the admission tests run on that store
// what Admit set: the specs it changed must survive the store.
var admitStores = map[string]func(t *testing.T) (ingest.RunStore, dag.Store){
	"memory": func(*testing.T) (ingest.RunStore, dag.Store) {
		d := dag.NewMemoryStore(dag.MemoryConfig{})
		return ingest.NewMemoryRunStore(d, nil), d
	},
	"postgres": func(t *testing.T) (ingest.RunStore, dag.Store) { return newPostgresRunStore(t, nil) },
}

// newAdmitFixture is an Ingester over memory stores whose repository
// acme/api has files at commit "head", with an admitter as Admit and,
// when statuses is set, a status reporter.
func newAdmitFixture(t *testing.T, files map[string]string, statuses bool) *admitFixture {
	t.Helper()
	return newAdmitFixtureOn(t, admitStores["memory"], files, statuses)
}

// newAdmitFixtureOn is newAdmitFixture over the stores stores makes.
func newAdmitFixtureOn(t *testing.T, stores func(t *testing.T) (ingest.RunStore, dag.Store), files map[string]string, statuses bool) *admitFixture {
	t.Helper()
	runs, d := stores(t)
	f := &admitFixture{vcs: &vcs.Memory{}, dag: d, admit: &admitter{}}
	f.vcs.AddCommit("acme/api", "head", files)
	f.vcs.SetRef("acme/api", "main", "head")
	cfg := ingest.IngesterConfig{Runs: runs, VCS: f.vcs, Debounce: -1, Admit: f.admit.admit}
	if statuses {
		f.statuses = runReporter(t, f.vcs)
		cfg.Statuses = f.statuses
	}
	in, err := ingest.NewIngester(cfg)
	require.NoError(t, err)
	f.in = in
	return f
}

func (f *admitFixture) jobs(t *testing.T, runID string) map[string]*cikit.JobSpec {
	t.Helper()
	jobs, err := f.dag.JobList(context.Background(), runID)
	require.NoError(t, err)
	out := map[string]*cikit.JobSpec{}
	for _, j := range jobs {
		out[j.Spec.ID] = j.Spec
	}
	return out
}

func admitPush(delivery string, paths []string) *ingest.Event {
	return &ingest.Event{Provider: ingest.GitHub, DeliveryID: delivery, Kind: ingest.KindPush, Org: "acme", Repo: "api",
		RefType: ingest.RefBranch, RefName: "main", SHA: "head", Before: "0000000000000000000000000000000000000000",
		DefaultBranch: "main", Paths: paths, EventTime: time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)}
}

// TestAdmitChangesTheSpecs: Admit is asked about every run before it is
// created, with the event, the run and what is known of the changed
// files, and what it sets on the jobs' specs (a gate, an admission) is
// what the store holds.
func TestAdmitChangesTheSpecs(t *testing.T) {
	t.Parallel()
	for name, stores := range admitStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testAdmitChangesTheSpecs(t, stores)
		})
	}
}

func testAdmitChangesTheSpecs(t *testing.T, stores func(t *testing.T) (ingest.RunStore, dag.Store)) {
	ctx := context.Background()
	f := newAdmitFixtureOn(t, stores, map[string]string{
		".cikit.yml":               "jobs:\n  build:\n    steps: [make]\n  deploy:\n    needs: [build]\n    steps: [make deploy]\n",
		".github/workflows/ci.yml": ghCI,
	}, false)
	gate := &cikit.Gate{Reasons: []string{"deployment to production"}, Reviewers: []string{"alice"}}
	f.admit.decide = func(run *dag.RunCreateParams, facts ingest.AdmitFacts) error {
		for _, j := range run.Jobs {
			j.Admission = &cikit.Admission{Decision: cikit.DecisionAllow, Reason: "a push to main", Policy: "test"}
			if j.ID == "deploy" {
				j.Admission.Decision, j.Gate = cikit.DecisionRequireApproval, gate
			}
		}
		return nil
	}
	ev := admitPush("d1", []string{"README.md", "src/main.go"})
	d, created, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.True(t, created)
	require.Len(t, d.RunIDs, 2)

	calls := f.admit.seen()
	require.Len(t, calls, 2, "one call per run")
	for i, pipeline := range []string{".cikit.yml", ".github/workflows/ci.yml"} {
		require.Same(t, ev, calls[i].ev)
		require.Equal(t, "acme/api:"+pipeline, calls[i].run.Pipeline)
		require.Equal(t, ingest.AdmitFacts{Pipeline: pipeline, ChangedFiles: []string{"README.md", "src/main.go"}}, calls[i].facts)
	}
	native := f.jobs(t, d.RunIDs[0])
	require.Equal(t, gate, native["deploy"].Gate)
	require.Equal(t, cikit.DecisionRequireApproval, native["deploy"].Admission.Decision)
	require.Nil(t, native["build"].Gate)
	require.Equal(t, &cikit.Admission{Decision: cikit.DecisionAllow, Reason: "a push to main", Policy: "test"}, native["build"].Admission)
	require.Equal(t, cikit.DecisionAllow, f.jobs(t, d.RunIDs[1])["lint"].Admission.Decision)

	_, created, err = f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.False(t, created)
	require.Len(t, f.admit.seen(), 2, "a redelivery creates nothing and asks nothing")
}

// TestAdmitFactsPipelineFileChanged: a run's pipeline counts as changed
// when the event changes its file, any pipeline file, or a file the
// pipeline includes, and when the changed files are not known.
func TestAdmitFactsPipelineFileChanged(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		".cikit.yml":     "jobs:\n  build:\n    steps: [make]\n",
		".gitlab-ci.yml": "include: [{local: ci/build.yml}]\n",
		"ci/build.yml":   "build:\n  script: [make]\n",
	}
	for name, tc := range map[string]struct {
		paths          []string
		native, gitlab bool
	}{
		"other files":              {paths: []string{"README.md", "ci/notes.md"}},
		"nothing":                  {paths: []string{}},
		"an included file":         {paths: []string{"README.md", "ci/build.yml"}, gitlab: true},
		"its own file":             {paths: []string{".gitlab-ci.yml"}, native: true, gitlab: true},
		"a native file":            {paths: []string{".cikit.yml"}, native: true, gitlab: true},
		"another pipeline":         {paths: []string{".github/workflows/new.yaml"}, native: true, gitlab: true},
		"not known (a new branch)": {native: true, gitlab: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newAdmitFixture(t, files, false)
			d, _, err := f.in.Ingest(context.Background(), admitPush("d-"+name, tc.paths))
			require.NoError(t, err)
			require.Len(t, d.RunIDs, 2, d.Dropped)
			calls := f.admit.seen()
			require.Len(t, calls, 2)
			require.Equal(t, ingest.AdmitFacts{Pipeline: ".cikit.yml", ChangedFiles: tc.paths, PipelineFileChanged: tc.native}, calls[0].facts)
			require.Equal(t, ingest.AdmitFacts{Pipeline: ".gitlab-ci.yml", ChangedFiles: tc.paths, PipelineFileChanged: tc.gitlab}, calls[1].facts)
		})
	}
}

// TestAdmitRefuses: a refusal of one run drops the whole event, with the
// refusal as the delivery's reason and a failure status of the refused
// pipeline on the commit; the delivery is not tried again. The policy
// sees the pull request's author association, on the event and in the
// run's context.
func TestAdmitRefuses(t *testing.T) {
	t.Parallel()
	for name, stores := range admitStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testAdmitRefuses(t, stores)
		})
	}
}

func testAdmitRefuses(t *testing.T, stores func(t *testing.T) (ingest.RunStore, dag.Store)) {
	ctx := context.Background()
	f := newAdmitFixtureOn(t, stores, map[string]string{
		".cikit.yml":               "jobs:\n  build:\n    steps: [make]\n",
		".github/workflows/ci.yml": "on: pull_request\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps: [{run: make lint}]\n",
	}, true)
	f.admit.decide = func(run *dag.RunCreateParams, facts ingest.AdmitFacts) error {
		if run.Context.AuthorAssociation == "FIRST_TIME_CONTRIBUTOR" && facts.Pipeline == ".github/workflows/ci.yml" {
			return fmt.Errorf("%w: a first-time contributor's fork may not run workflows", ingest.ErrRefused)
		}
		return nil
	}
	ev := &ingest.Event{Provider: ingest.GitHub, DeliveryID: "pr-1", Kind: ingest.KindPullRequest, Org: "acme", Repo: "api",
		RefType: ingest.RefBranch, RefName: "fix-typo", SHA: "head", DefaultBranch: "main", Fork: true, PRNumber: 7,
		BaseRef: "main", AuthorAssociation: "FIRST_TIME_CONTRIBUTOR", Paths: []string{"README.md"},
		EventTime: time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)}
	d, created, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err, "a refusal is no error: the event is dropped")
	require.True(t, created)
	require.Empty(t, d.RunIDs, "the native pipeline, admitted, does not run either")
	const reason = "refused by policy: a first-time contributor's fork may not run workflows"
	require.Equal(t, ".github/workflows/ci.yml "+reason, d.Dropped)
	calls := f.admit.seen()
	require.Len(t, calls, 2)
	require.Equal(t, "FIRST_TIME_CONTRIBUTOR", calls[1].ev.AuthorAssociation)

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, f.statuses.Flush(rctx))
	require.Equal(t, []vcs.Status{{Context: "cikit/.github/workflows/ci.yml", State: vcs.StateFailure, Description: reason}},
		f.vcs.Statuses("acme/api", "head"))

	again, created, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, d.Dropped, again.Dropped)
	require.Len(t, f.admit.seen(), 2, "a refused delivery is not admitted again")
}

// TestAdmitTransientError: an Admit error that is no refusal fails the
// ingestion without recording it, so the delivery is tried again, and
// creates its runs once Admit answers.
func TestAdmitTransientError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAdmitFixture(t, map[string]string{".cikit.yml": "jobs:\n  build:\n    steps: [make]\n"}, false)
	down := errors.New("the policy engine is unavailable")
	f.admit.decide = func(*dag.RunCreateParams, ingest.AdmitFacts) error { return down }
	ev := admitPush("d1", []string{"README.md"})
	_, _, err := f.in.Ingest(ctx, ev)
	require.ErrorIs(t, err, down)
	require.NotErrorIs(t, err, ingest.ErrMalformed, "retried, not dead-lettered")
	require.NotErrorIs(t, err, ingest.ErrRefused)
	require.ErrorContains(t, err, "admitting the run of .cikit.yml of acme/api at head")

	f.admit.mu.Lock()
	f.admit.decide = nil
	f.admit.mu.Unlock()
	d, created, err := f.in.Ingest(ctx, ev)
	require.NoError(t, err)
	require.True(t, created, "nothing was recorded by the failed attempt")
	require.Len(t, d.RunIDs, 1)
	require.Len(t, f.admit.seen(), 2)
}

// TestAdmitManualTrigger: a manual run is admitted as a webhook's is: a
// gate Admit sets is on the created job, a refusal is 422 with the
// reason, and a failing Admit 503.
func TestAdmitManualTrigger(t *testing.T) {
	t.Parallel()
	f := newAdmitFixture(t, map[string]string{".github/workflows/deploy.yml": manualPipeline}, false)
	f.admit.decide = func(run *dag.RunCreateParams, _ ingest.AdmitFacts) error {
		switch run.Context.Inputs["target"] {
		case "forbidden":
			return fmt.Errorf("%w: no deployments to forbidden", ingest.ErrRefused)
		case "down":
			return errors.New("the policy engine is unavailable")
		}
		run.Jobs[0].Gate = &cikit.Gate{Reasons: []string{"a manual deployment"}}
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle(ingest.ManualPattern, ingest.NewManualTrigger(f.in, f.vcs))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	status, out := trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main", "variables": {"target": "prod"}}`)
	require.Equal(t, http.StatusCreated, status, out)
	runs := out["run_ids"].([]any)
	require.Len(t, runs, 1)
	require.Equal(t, &cikit.Gate{Reasons: []string{"a manual deployment"}}, f.jobs(t, runs[0].(string))["deploy"].Gate)
	calls := f.admit.seen()
	require.Len(t, calls, 1)
	require.Equal(t, ingest.KindDispatch, calls[0].ev.Kind)
	require.Equal(t, ingest.AdmitFacts{Pipeline: ".github/workflows/deploy.yml", PipelineFileChanged: true}, calls[0].facts,
		"a dispatch changes no known files")

	status, out = trigger(t, srv, "/repos/acme/api/pipelines", "k2", `{"ref": "main", "variables": {"target": "forbidden"}}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, out)
	require.Equal(t, ".github/workflows/deploy.yml refused by policy: no deployments to forbidden", out["dropped"])

	status, out = trigger(t, srv, "/repos/acme/api/pipelines", "k3", `{"ref": "main", "variables": {"target": "down"}}`)
	require.Equal(t, http.StatusServiceUnavailable, status, out)
}
