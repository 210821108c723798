package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/dag"
	"github.com/cikit/cikit/fleet"
)

// claimContext claims a job and returns it with the context its answer
// carries.
func (b *bundle) claimContext(t *testing.T, runner string) (*claimed, *cikit.JobContext) {
	t.Helper()
	status, out := b.call(t, http.MethodGet, "/v1/jobs/claim?wait=5", runner, nil)
	require.Equal(t, http.StatusOK, status, "%v", out)
	raw, err := json.Marshal(out["context"])
	require.NoError(t, err)
	jc := &cikit.JobContext{}
	require.NoError(t, json.Unmarshal(raw, jc))
	return &claimed{RunID: out["run_id"].(string), JobID: out["job_id"].(string), Token: out["job_token"].(string),
		Attempt: int(out["attempt"].(float64))}, jc
}

// TestClaimCarriesTheJobContext: the claim's answer holds the run's
// context, the attempt, the source the minter gave for the job's token,
// and the final states and outputs of the jobs needed; the completion's
// report is stored with the job. On both stores.
func TestClaimCarriesTheJobContext(t *testing.T) {
	t.Parallel()
	for name, st := range map[string]stores{"Memory": memoryStores, "Postgres": postgresStores} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var minted []fleet.JobRef
			b := setupWith(t, st, func(sc *fleet.ServerConfig) {
				sc.Source = fleet.SourceMinterFunc(func(_ context.Context, run *cikit.RunContext, job fleet.JobRef) (*cikit.CheckoutSource, error) {
					minted = append(minted, job) // claims are made one at a time here
					return &cikit.CheckoutSource{URL: "https://git.example/" + run.Repository, Token: job.Token}, nil
				})
			})
			ctx := context.Background()
			rc := &cikit.RunContext{Provider: "gitlab", Repository: "acme/platform/api", Event: "merge_request_event",
				SHA: "89abcdef0123456789abcdef0123456789abcdef", PRNumber: 12, Inputs: map[string]string{"DEPLOY": "no"}}
			digest := "sha256:" + strings.Repeat("4f2a9c1e", 8)
			step := []cikit.Step{{Run: "true"}}
			run, err := b.jobs.RunCreate(ctx, &dag.RunCreateParams{Context: rc, Jobs: []*cikit.JobSpec{
				{ID: "a", Steps: step}, {ID: "lint", Steps: step, AllowFailure: true},
				{ID: "b", Needs: []string{"a", "lint"}, Steps: step}}})
			require.NoError(t, err)
			require.NoError(t, b.server.DispatchRun(ctx, run.ID))
			runner := b.register(t)

			done := map[string]*cikit.JobContext{}
			for range 2 {
				c, jc := b.claimContext(t, runner)
				done[c.JobID] = jc
				require.Equal(t, run.ID, jc.RunID)
				require.Equal(t, 1, jc.Attempt)
				require.Equal(t, rc.Repository, jc.Repository)
				require.Equal(t, rc.Inputs, jc.Inputs)
				require.Equal(t, 12, jc.PRNumber)
				require.Equal(t, "https://git.example/acme/platform/api", jc.Source.URL)
				require.Equal(t, c.Token, jc.Source.Token, "the minter is given the job's token")
				body := map[string]any{"result": "succeeded", "outputs": map[string]string{"from": c.JobID},
					"annotations": []cikit.Annotation{{Level: "warning", Message: "careful", File: "a.go", Line: 1}},
					"commit":      strings.ToUpper(rc.SHA), "checkout_duration_ms": 250, "env_names": []string{"CI", "CI_COMMIT_SHA"},
					"image": "alpine:3.19", "image_digest": digest}
				if c.JobID == "lint" {
					body["result"], body["exit_code"] = "failed", 1
				}
				status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, body)
				require.Equal(t, http.StatusOK, status, "%v", out)
			}
			require.Len(t, done, 2)
			a, err := b.jobs.JobGet(ctx, run.ID, "a")
			require.NoError(t, err)
			require.Equal(t, &dag.JobResult{Outputs: map[string]string{"from": "a"},
				Annotations: []cikit.Annotation{{Level: "warning", Message: "careful", File: "a.go", Line: 1}},
				Commit:      rc.SHA, CheckoutDuration: 250e6, EnvNames: []string{"CI", "CI_COMMIT_SHA"},
				ImageRef: "alpine:3.19", ImageDigest: digest}, a.Result,
				"the commit is stored in lower case")

			c, jc := b.claimContext(t, runner)
			require.Equal(t, "b", c.JobID)
			require.Equal(t, map[string]cikit.NeedResult{
				"a":    {Result: cikit.JobSucceeded, Outputs: map[string]string{"from": "a"}},
				"lint": {Result: cikit.JobFailed, Outputs: map[string]string{"from": "lint"}},
			}, jc.Needs)
			require.Len(t, minted, 3)
		})
	}
}

// TestCompletionReportLimits: a report past a limit, or one the store
// could not hold, is refused with 413 or 400 and a JSON error naming the
// field; the attempt still runs, and a valid completion ends it.
func TestCompletionReportLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runID := b.newRun(t, &cikit.JobSpec{ID: "build", Steps: []cikit.Step{{Run: "true"}}})
	runner := b.register(t)
	c := b.claim(t, runner, "5")
	require.NotNil(t, c)

	big := strings.Repeat("v", cikit.MaxOutputValueBytes)
	many := map[string]string{}
	for i := range cikit.MaxOutputsBytes/cikit.MaxOutputValueBytes + 1 {
		many[fmt.Sprint("o", i)] = big
	}
	annotations := make([]cikit.Annotation, cikit.MaxAnnotations+1)
	for i := range annotations {
		annotations[i] = cikit.Annotation{Level: "notice", Message: "m"}
	}
	envNames := make([]string, 4097)
	for i := range envNames {
		envNames[i] = fmt.Sprint("V", i)
	}
	for _, tc := range []struct {
		name   string
		report map[string]any
		status int
		field  string
	}{
		{"OutputValue", map[string]any{"outputs": map[string]string{"v": big + "x"}}, http.StatusRequestEntityTooLarge, "outputs.v"},
		{"Outputs", map[string]any{"outputs": many}, http.StatusRequestEntityTooLarge, "outputs"},
		{"OutputName", map[string]any{"outputs": map[string]string{strings.Repeat("n", 257): "1"}}, http.StatusRequestEntityTooLarge, "outputs"},
		{"EmptyOutputName", map[string]any{"outputs": map[string]string{"": "1"}}, http.StatusBadRequest, "outputs"},
		{"OutputNUL", map[string]any{"outputs": map[string]string{"v": "a\x00b"}}, http.StatusBadRequest, "outputs.v"},
		{"Annotations", map[string]any{"annotations": annotations}, http.StatusRequestEntityTooLarge, "annotations"},
		{"AnnotationLevel", map[string]any{"annotations": []cikit.Annotation{{Level: "fatal", Message: "m"}}}, http.StatusBadRequest, "annotations[0].level"},
		{"AnnotationMessage", map[string]any{"annotations": []cikit.Annotation{{Level: "error", Message: strings.Repeat("m", 16<<10+1)}}},
			http.StatusRequestEntityTooLarge, "annotations[0].message"},
		{"AnnotationFile", map[string]any{"annotations": []cikit.Annotation{{Level: "error", Message: "m", File: strings.Repeat("f", 1025)}}},
			http.StatusRequestEntityTooLarge, "annotations[0].file"},
		{"AnnotationLine", map[string]any{"annotations": []cikit.Annotation{{Level: "error", Message: "m", Line: -1}}}, http.StatusBadRequest, "annotations[0]"},
		{"Commit", map[string]any{"commit": "main"}, http.StatusBadRequest, "commit"},
		{"CheckoutDuration", map[string]any{"checkout_duration_ms": -1}, http.StatusBadRequest, "checkout_duration_ms"},
		{"EnvNames", map[string]any{"env_names": envNames}, http.StatusRequestEntityTooLarge, "env_names"},
		{"EnvNameValue", map[string]any{"env_names": []string{"A=1"}}, http.StatusBadRequest, "env_names[0]"},
		{"EnvNameLength", map[string]any{"env_names": []string{strings.Repeat("A", 257)}}, http.StatusRequestEntityTooLarge, "env_names[0]"},
		{"ImageDigestShort", map[string]any{"image_digest": "sha256:4f2a9c1e"}, http.StatusBadRequest, "image_digest"},
		{"ImageDigestNoAlgorithm", map[string]any{"image_digest": strings.Repeat("ab", 32)}, http.StatusBadRequest, "image_digest"},
		{"ImageDigestAlgorithm", map[string]any{"image_digest": "sha512:" + strings.Repeat("ab", 64)}, http.StatusBadRequest, "image_digest"},
		{"ImageDigestUpperCase", map[string]any{"image_digest": "sha256:" + strings.Repeat("AB", 32)}, http.StatusBadRequest, "image_digest"},
		{"ImageDigestOfRef", map[string]any{"image": "alpine:3.19", "image_digest": "alpine:3.19"}, http.StatusBadRequest, "image_digest"},
		{"ImageRefLength", map[string]any{"image": "registry.example/" + strings.Repeat("a", 512-len("registry.example/")) + "x"},
			http.StatusRequestEntityTooLarge, "image"},
		{"ImageRefNewline", map[string]any{"image": "alpine:3.19\nforged: line"}, http.StatusBadRequest, "image"},
		{"ImageRefEscape", map[string]any{"image": "alpine\x1b[31m:3.19"}, http.StatusBadRequest, "image"},
		{"ImageRefC1Control", map[string]any{"image": "alpine\u009b:3.19"}, http.StatusBadRequest, "image"},
		{"ImageRefNUL", map[string]any{"image": "alpine\x00:3.19"}, http.StatusBadRequest, "image"},
	} {
		tc.report["result"] = "succeeded"
		status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, tc.report)
		require.Equal(t, tc.status, status, "%s: %v", tc.name, out)
		require.Equal(t, tc.field, out["field"], "%s: %v", tc.name, out)
		require.Contains(t, out["error"], tc.field, tc.name)
	}

	// A body past the completion's limit.
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+jobPath(c, "complete"),
		bytes.NewReader([]byte(`{"result":"succeeded","reason":"`+strings.Repeat("r", 8<<20)+`"}`)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	j, err := b.jobs.JobGet(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Equal(t, cikit.JobRunning, j.State, "a refused completion changes nothing")
	most := map[string]string{}
	for i := range cikit.MaxOutputsBytes/cikit.MaxOutputValueBytes - 1 {
		most[fmt.Sprint("o", i)] = big
	}
	// An image reference at its limit, of a registry with a port, pinned
	// to its digest.
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	ref := "registry.example:5000/" + strings.Repeat("a", 512-len("registry.example:5000/@")-len(digest)) + "@" + digest
	require.Len(t, ref, 512)
	status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded", "outputs": most,
		"image": ref, "image_digest": digest})
	require.Equal(t, http.StatusOK, status, "a report within the limits: %v", out)
	j, err = b.jobs.JobGet(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Equal(t, most, j.Result.Outputs)
	require.Equal(t, ref, j.Result.ImageRef)
	require.Equal(t, digest, j.Result.ImageDigest)
}

// TestClaimFailsAJobWhoseContextIsTooLarge: a job needing jobs whose
// outputs together pass cikit.MaxJobContextBytes fails as a configuration
// error, naming the limit, instead of being handed to a runner that could
// not decode its claim.
func TestClaimFailsAJobWhoseContextIsTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	step := []cikit.Step{{Run: "true"}}
	specs := []*cikit.JobSpec{{ID: "last", Steps: step}}
	for i := range 5 {
		id := fmt.Sprint("n", i)
		specs = append(specs, &cikit.JobSpec{ID: id, Steps: step})
		specs[0].Needs = append(specs[0].Needs, id)
	}
	runID := b.newRun(t, specs...)
	runner := b.register(t)
	outputs := map[string]string{}
	for i := range cikit.MaxOutputsBytes/cikit.MaxOutputValueBytes - 1 {
		outputs[fmt.Sprint("o", i)] = strings.Repeat("v", cikit.MaxOutputValueBytes)
	}
	for range 5 {
		c := b.claim(t, runner, "5")
		status, out := b.call(t, http.MethodPost, jobPath(c, "complete"), c.Token, map[string]any{"result": "succeeded", "outputs": outputs})
		require.Equal(t, http.StatusOK, status, "%v", out)
	}
	require.Nil(t, b.claim(t, runner, "0"), "the job is refused, not handed out")
	j, err := b.jobs.JobGet(context.Background(), runID, "last")
	require.NoError(t, err)
	require.Equal(t, cikit.JobFailed, j.State)
	require.Equal(t, 1, j.Attempt, "a configuration failure is not retried")
	require.Contains(t, j.Reason, "cikit.MaxJobContextBytes")
}

// TestClaimFailsAJobWhoseSourceCannotBeMinted: a minter's error fails
// the attempt as an infrastructure failure, which is retried.
func TestClaimFailsAJobWhoseSourceCannotBeMinted(t *testing.T) {
	t.Parallel()
	b := setupWith(t, memoryStores, func(sc *fleet.ServerConfig) {
		sc.Source = fleet.SourceMinterFunc(func(context.Context, *cikit.RunContext, fleet.JobRef) (*cikit.CheckoutSource, error) {
			return nil, errors.New("the forge is unreachable")
		})
	})
	runID := b.newRun(t, &cikit.JobSpec{ID: "build", Steps: []cikit.Step{{Run: "true"}}})
	runner := b.register(t)
	require.Nil(t, b.claim(t, runner, "0"))
	attempts, err := b.jobs.JobAttempts(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Len(t, attempts, 1+dag.DefaultInfrastructureRetries, "retried as an infrastructure failure (without backoff here)")
	for _, a := range attempts {
		require.Contains(t, a.Reason, "minting the job's checkout credential: the forge is unreachable")
	}
	j, err := b.jobs.JobGet(context.Background(), runID, "build")
	require.NoError(t, err)
	require.Equal(t, cikit.JobFailed, j.State)
	require.Equal(t, 1+dag.DefaultInfrastructureRetries, j.Attempt, "the retries of an infrastructure failure are spent")
}
