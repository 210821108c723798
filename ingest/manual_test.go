package ingest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/ingest"
)

const manualPipeline = `on:
  workflow_dispatch:
    inputs:
      target:
        type: string
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - run: make deploy
`

func manualServer(t *testing.T) (*httptest.Server, *fixture) {
	t.Helper()
	f := newFixture(t, -1)
	f.vcs.AddCommit("acme/api", "c9", map[string]string{".github/workflows/deploy.yml": manualPipeline})
	f.vcs.SetRef("acme/api", "main", "c9")
	f.vcs.SetRef("acme/api", "refs/tags/v1", "c1")
	mux := http.NewServeMux()
	mux.Handle(ingest.ManualPattern, ingest.NewManualTrigger(f.in, f.vcs))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, f
}

func trigger(t *testing.T, srv *httptest.Server, path, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func TestManualTrigger(t *testing.T) {
	t.Parallel()
	srv, f := manualServer(t)
	status, out := trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main", "variables": {"target": "prod"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	require.Equal(t, "k1", out["delivery_id"])
	require.Equal(t, "c9", out["sha"], "the ref resolved")
	ids := out["run_ids"].([]any)
	require.Len(t, ids, 1)
	run, err := f.dag.RunGet(t.Context(), ids[0].(string))
	require.NoError(t, err)
	require.Equal(t, "acme/api:.github/workflows/deploy.yml", run.Pipeline)

	status, again := trigger(t, srv, "/repos/acme/api/pipelines", "k1", `{"ref": "main"}`)
	require.Equal(t, http.StatusOK, status, "a retried request")
	require.Equal(t, ids, again["run_ids"])

	status, other := trigger(t, srv, "/repos/acme/api/pipelines", "k2", `{"ref": "main"}`)
	require.Equal(t, http.StatusCreated, status)
	require.NotEqual(t, ids, other["run_ids"], "another key starts another run")
}

func TestManualTriggerRefusals(t *testing.T) {
	t.Parallel()
	srv, _ := manualServer(t)
	for _, c := range []struct {
		name, key, body string
		status          int
		want            string
	}{
		{"no key", "", `{"ref": "main"}`, http.StatusBadRequest, "Idempotency-Key"},
		{"not JSON", "k", `{"ref": `, http.StatusBadRequest, "malformed request"},
		{"unknown field", "k", `{"ref": "main", "branch": "x"}`, http.StatusBadRequest, "unknown field"},
		{"no ref", "k", `{}`, http.StatusBadRequest, `"ref" is required`},
		{"unknown ref", "k", `{"ref": "nope"}`, http.StatusNotFound, "has no ref nope"},
		{"nothing runs", "k3", `{"ref": "refs/tags/v1"}`, http.StatusUnprocessableEntity, "not triggered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out := trigger(t, srv, "/repos/acme/api/pipelines", c.key, c.body)
			require.Equal(t, c.status, status, "%v", out)
			msg, _ := out["error"].(string)
			if msg == "" {
				msg, _ = out["dropped"].(string)
			}
			require.Contains(t, msg, c.want)
		})
	}
}

// typedPipeline declares inputs of every checked kind; its flagged job
// runs only when the boolean flag is true, which the compiler decides
// with the inputs typed.
const typedPipeline = `on:
  workflow_dispatch:
    inputs:
      target:
        type: string
        required: true
      flag:
        type: boolean
        default: false
      n:
        type: number
      level:
        type: choice
        options: [low, high]
        default: low
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - run: make deploy
  flagged:
    if: ${{ inputs.flag }}
    runs-on: ubuntu-latest
    steps:
      - run: make flagged
`

// bareDispatch is a workflow started by hand that declares no inputs.
const bareDispatch = `on: workflow_dispatch
jobs:
  go:
    runs-on: ubuntu-latest
    steps:
      - run: make
`

// freeGitLab is a GitLab file, whose variables are free-form.
const freeGitLab = `job:
  script: [make]
`

func typedServer(t *testing.T) (*httptest.Server, *fixture) {
	t.Helper()
	srv, f := manualServer(t)
	f.vcs.AddCommit("acme/api", "c20", map[string]string{".github/workflows/typed.yml": typedPipeline, ".gitlab-ci.yml": freeGitLab})
	f.vcs.SetRef("acme/api", "typed", "c20")
	f.vcs.AddCommit("acme/api", "c21", map[string]string{".github/workflows/bare.yml": bareDispatch})
	f.vcs.SetRef("acme/api", "bare", "c21")
	return srv, f
}

func TestManualTriggerBadInputs(t *testing.T) {
	t.Parallel()
	srv, f := typedServer(t)
	const typed = ".github/workflows/typed.yml"
	for _, c := range []struct {
		name, body, field string
		want              []string
	}{
		{"unknown", `{"ref": "typed", "variables": {"target": "x", "leve": "low"}}`, "variables.leve",
			[]string{"input leve of " + typed, "declares no such input (its inputs: target, flag, n, level)", `did you mean "level"?`}},
		{"not a boolean", `{"ref": "typed", "variables": {"target": "x", "flag": "yes"}}`, "variables.flag",
			[]string{"input flag of " + typed, `a boolean input is true or false, got "yes"`}},
		{"not a number", `{"ref": "typed", "variables": {"target": "x", "n": "two"}}`, "variables.n",
			[]string{"input n of " + typed, `a number input takes a number, got "two"`}},
		{"not a choice", `{"ref": "typed", "variables": {"target": "x", "level": "mid"}}`, "variables.level",
			[]string{"input level of " + typed, `"mid" is not one of the choices low, high`}},
		{"required missing", `{"ref": "typed", "variables": {"flag": "true"}}`, "variables.target",
			[]string{"input target of " + typed, "required and has no default"}},
		{"none declared", `{"ref": "bare", "variables": {"x": "1"}}`, "variables.x",
			[]string{"input x of .github/workflows/bare.yml", "the pipeline declares no inputs"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out := trigger(t, srv, "/repos/acme/api/pipelines", "bad-"+strings.ReplaceAll(c.name, " ", "-"), c.body)
			require.Equal(t, http.StatusBadRequest, status, "%v", out)
			require.Equal(t, c.field, out["field"])
			for _, w := range c.want {
				require.Contains(t, out["error"], w)
			}
			require.Nil(t, out["run_ids"])
		})
	}
	runs, err := f.dag.RunList(t.Context(), &dag.RunListParams{})
	require.NoError(t, err)
	require.Empty(t, runs, "a refused trigger starts no run, not even of the GitLab file that takes any variable")

	// A refused request recorded nothing: the same key, corrected, starts
	// the runs.
	status, out := trigger(t, srv, "/repos/acme/api/pipelines", "bad-not-a-boolean", `{"ref": "typed", "variables": {"target": "x"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	require.Len(t, out["run_ids"], 2)
}

func TestManualTriggerTypedInputs(t *testing.T) {
	t.Parallel()
	srv, f := typedServer(t)
	for _, c := range []struct {
		name, flag string
		jobs       []string
	}{
		{"flag false", "false", []string{"deploy"}},
		{"flag true", "true", []string{"deploy", "flagged"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out := trigger(t, srv, "/repos/acme/api/pipelines", "typed-"+c.flag,
				`{"ref": "typed", "variables": {"target": "prod", "flag": "`+c.flag+`", "n": "1.50"}}`)
			require.Equal(t, http.StatusCreated, status, "%v", out)
			ids := out["run_ids"].([]any)
			require.Len(t, ids, 2)
			byPipeline := map[string]*dag.Run{}
			for _, id := range ids {
				run, err := f.dag.RunGet(t.Context(), id.(string))
				require.NoError(t, err)
				byPipeline[run.Pipeline] = run
			}

			gh := byPipeline["acme/api:.github/workflows/typed.yml"]
			require.NotNil(t, gh)
			require.Equal(t, map[string]string{"target": "prod", "flag": c.flag, "n": "1.50", "level": "low"}, gh.Context.Inputs,
				"the default of level is filled in, the values kept as given")
			require.Equal(t, map[string]string{"flag": "boolean", "n": "number"}, gh.Context.InputTypes)
			require.Equal(t, map[string]any{"target": "prod", "flag": c.flag == "true", "n": 1.5, "level": "low"}, gh.Context.TypedInputs())
			var payload struct {
				Inputs map[string]string `json:"inputs"`
				Ref    string            `json:"ref"`
			}
			require.NoError(t, json.Unmarshal(gh.Context.Payload, &payload))
			require.Equal(t, gh.Context.Inputs, payload.Inputs, "github.event.inputs holds the inputs as text")
			require.Equal(t, "refs/heads/typed", payload.Ref)
			jobs, err := f.dag.JobList(t.Context(), gh.ID)
			require.NoError(t, err)
			var run []string
			for _, j := range jobs {
				if j.Spec.When != cikit.WhenNever {
					run = append(run, j.ID())
				}
			}
			require.ElementsMatch(t, c.jobs, run, "if: inputs.flag is decided with the boolean")

			gl := byPipeline["acme/api:.gitlab-ci.yml"]
			require.NotNil(t, gl)
			require.Equal(t, map[string]string{"target": "prod", "flag": c.flag, "n": "1.50"}, gl.Context.Inputs,
				"a GitLab file takes the variables as they are")
			require.Nil(t, gl.Context.InputTypes)
		})
	}
}

// TestManualTriggerOnePipeline: a trigger naming a pipeline starts that
// one alone, and only its inputs are checked (a workflow that declares
// none does not refuse the trigger); a pipeline the commit lacks starts
// nothing, and one that is no pipeline path is a 400.
func TestManualTriggerOnePipeline(t *testing.T) {
	t.Parallel()
	srv, f := typedServer(t)
	f.vcs.AddCommit("acme/api", "c22", map[string]string{".github/workflows/typed.yml": typedPipeline, ".github/workflows/bare.yml": bareDispatch})
	f.vcs.SetRef("acme/api", "both", "c22")

	status, out := trigger(t, srv, "/repos/acme/api/pipelines", "one-bare", `{"ref": "both", "variables": {"target": "x"}}`)
	require.Equal(t, http.StatusBadRequest, status, "every pipeline: bare.yml declares no inputs: %v", out)

	status, out = trigger(t, srv, "/repos/acme/api/pipelines", "one-typed", `{"ref": "both", "pipeline": ".github/workflows/typed.yml", "variables": {"target": "x"}}`)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	require.Len(t, out["run_ids"], 1)
	run, err := f.dag.RunGet(t.Context(), out["run_ids"].([]any)[0].(string))
	require.NoError(t, err)
	require.Equal(t, "acme/api:.github/workflows/typed.yml", run.Pipeline)

	status, out = trigger(t, srv, "/repos/acme/api/pipelines", "one-missing", `{"ref": "both", "pipeline": ".github/workflows/gone.yml"}`)
	require.Equal(t, http.StatusUnprocessableEntity, status, "%v", out)
	require.Contains(t, out["dropped"], "has no pipeline .github/workflows/gone.yml")

	status, out = trigger(t, srv, "/repos/acme/api/pipelines", "one-bad", `{"ref": "both", "pipeline": "../etc/passwd"}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", out)
	require.Equal(t, "pipeline", out["field"])
}
