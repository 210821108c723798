package expr

import (
	"maps"
	"slices"
	"strings"

	"github.com/cikit/cikit"
)

// GitHubNeeds is GitHub's needs context of a job whose needs ended as
// needs say: each job by its ID, with its result (GitHubResult) and
// outputs, and the variants of a matrix job ("test (linux, 20)": a GitHub
// job's key holds no space, so the part before " (" is the key) also
// together under its key, as GitHub shows a matrix job: its result a
// failure when a variant failed, else cancelled when one was, else a
// success when one succeeded, else skipped; its outputs merged in the
// order of the variants' IDs, a later variant's value winning. The
// compiler (expanding run-time matrices, deciding run-time conditions)
// and the runner build the context with it, so they agree.
func GitHubNeeds(needs map[string]cikit.NeedResult) map[string]any {
	out := make(map[string]any, len(needs))
	type group struct {
		results []cikit.JobState
		outputs map[string]string
	}
	groups := map[string]*group{}
	for _, id := range slices.Sorted(maps.Keys(needs)) {
		n := needs[id]
		out[id] = needResult(n.Result, n.Outputs)
		key, _, ok := strings.Cut(id, " (")
		if !ok || !strings.HasSuffix(id, ")") || key == "" {
			continue
		}
		g := groups[key]
		if g == nil {
			g = &group{outputs: map[string]string{}}
			groups[key] = g
		}
		g.results = append(g.results, n.Result)
		maps.Copy(g.outputs, n.Outputs)
	}
	for key, g := range groups {
		if _, taken := out[key]; taken {
			continue
		}
		res := cikit.JobSkipped
		switch {
		case slices.Contains(g.results, cikit.JobFailed):
			res = cikit.JobFailed
		case slices.Contains(g.results, cikit.JobCancelled):
			res = cikit.JobCancelled
		case slices.Contains(g.results, cikit.JobSucceeded):
			res = cikit.JobSucceeded
		}
		out[key] = needResult(res, g.outputs)
	}
	return out
}

// needResult is one entry of the needs context.
func needResult(s cikit.JobState, outputs map[string]string) map[string]any {
	o := make(map[string]any, len(outputs))
	for k, v := range outputs {
		o[k] = v
	}
	return map[string]any{"result": GitHubResult(s), "outputs": o}
}

// GitHubResult is a job's state as GitHub's needs.<job>.result names it:
// success, failure, cancelled or skipped.
func GitHubResult(s cikit.JobState) string {
	switch s {
	case cikit.JobSucceeded:
		return "success"
	case cikit.JobFailed:
		return "failure"
	case cikit.JobCancelled:
		return "cancelled"
	case cikit.JobSkipped:
		return "skipped"
	}
	return string(s)
}
