package compiler_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
)

// fuzzExpandWorkflow has two jobs with matrices computed from the outputs
// of job a: b's whole matrix, and c's axis os and its include entries,
// beside a literal axis, with a name and runs-on from the matrix.
const fuzzExpandWorkflow = `
on: push
jobs:
  a:
    runs-on: ubuntu-latest
    outputs:
      m: ${{ steps.s.outputs.m }}
      os: ${{ steps.s.outputs.os }}
      inc: ${{ steps.s.outputs.inc }}
    steps: [{id: s, run: echo}]
  b:
    needs: a
    strategy:
      matrix: ${{ fromJSON(needs.a.outputs.m) }}
    runs-on: ${{ matrix.os }}
    steps:
      - run: echo ${{ toJSON(matrix) }}
  c:
    needs: [a]
    name: c ${{ matrix.os }} ${{ matrix.n }}
    strategy:
      matrix:
        os: ${{ fromJSON(needs.a.outputs.os) }}
        n: [1, "2"]
        include: ${{ fromJSON(needs.a.outputs.inc) }}
        exclude:
          - n: 1
            os: ${{ needs.a.outputs.os }}
    runs-on: [self-hosted, "${{ matrix.os }}"]
    timeout-minutes: ${{ matrix.n }}
    steps:
      - run: echo ${{ matrix.extra }}
`

// FuzzExpandJob expands matrices computed from outputs that are arbitrary
// text, as a job's steps may write anything.
//
// Invariant: ExpandJob never panics; it fails with an *ExpandError
// (whose message is short, whatever the outputs) or returns between 1
// and Options.MaxMatrixJobs variants, each with an ID of its own of the
// form "job (…)", MatrixOf the placeholder, no Expand and the
// placeholder's needs.
func FuzzExpandJob(f *testing.F) {
	f.Add(`{"os":["linux","mac"],"v":[1,2]}`, `["x","y"]`, `[{"os":"z","extra":1}]`)
	f.Add(`{"include":[{"os":"a"},{"os":"b","n":{"deep":[1,[2]]}}]}`, `[null, true, 1.5, "s"]`, `[]`)
	f.Add(`{"os":[1,"1",1.0],"exclude":[{"os":1}]}`, `"linux"`, `{"os":1}`)
	f.Add(`not json`, ``, `[[1]]`)
	f.Add(`{"os":[],"include":"x"}`, `[{}]`, `[{"n":1,"os":"x"}]`)
	f.Add(`{"a":[1,2,3,4,5,6,7,8,9],"b":[1,2,3]}`, `[1,2,3,4,5,6,7,8,9]`, `null`)
	f.Add(`{"OS":["x"],"os":["y"]}`, `["${{ github.sha }}"]`, `[{"os":"${{ 1 }}"}]`)
	plan, diags, err := compiler.Compile(context.Background(), fstestSource{expandWorkflow: fuzzExpandWorkflow}, expandWorkflow,
		compiler.Options{Event: expandEvent, MaxMatrixJobs: 16})
	if err != nil || compiler.HasErrors(diags) {
		f.Fatalf("compile: %v %v", err, diags)
	}
	var placeholders []*cikit.JobSpec
	for _, j := range plan.Jobs {
		if j.Expand != nil {
			placeholders = append(placeholders, j)
		}
	}
	if len(placeholders) != 2 {
		f.Fatalf("%d placeholders, want 2", len(placeholders))
	}
	f.Fuzz(func(t *testing.T, m, os, inc string) {
		needs := map[string]cikit.NeedResult{"a": {Result: cikit.JobSucceeded, Outputs: map[string]string{"m": m, "os": os, "inc": inc}}}
		for _, p := range placeholders {
			vs, err := compiler.ExpandJob(context.Background(), &dag.ExpandRequest{Job: p, Needs: needs})
			if err != nil {
				if _, ok := errors.AsType[*compiler.ExpandError](err); !ok {
					t.Fatalf("%s: an error that is not the outputs' fault: %v", p.ID, err)
				}
				if len(err.Error()) > 4096 {
					t.Fatalf("%s: a message of %d bytes", p.ID, len(err.Error()))
				}
				continue
			}
			if len(vs) == 0 || len(vs) > 16 {
				t.Fatalf("%s: %d variants", p.ID, len(vs))
			}
			seen := map[string]bool{}
			for _, v := range vs {
				switch {
				case seen[v.ID]:
					t.Fatalf("%s: two variants %q", p.ID, v.ID)
				case !strings.HasPrefix(v.ID, p.ID+" (") || !strings.HasSuffix(v.ID, ")") && !strings.Contains(v.ID, ") #"):
					t.Fatalf("%s: variant ID %q", p.ID, v.ID)
				case v.MatrixOf != p.ID || v.Expand != nil:
					t.Fatalf("%s: variant %q of %q, expand %d bytes", p.ID, v.ID, v.MatrixOf, len(v.Expand))
				case strings.Join(v.Needs, ",") != strings.Join(p.Needs, ","):
					t.Fatalf("%s: variant %q needs %v, not %v", p.ID, v.ID, v.Needs, p.Needs)
				case len(v.Steps) == 0:
					t.Fatalf("%s: variant %q has no steps", p.ID, v.ID)
				}
				seen[v.ID] = true
			}
		}
	})
}
