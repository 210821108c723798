// Package compiler turns pipeline files into a Plan: the jobs of a run,
// fully resolved into cikit.JobSpecs, and their dag.Graph.
//
// # What it owns
//
// The compiler owns the meaning of pipeline files: their keys, defaults,
// stage barriers, needs and everything a person can get wrong in them. It
// is pure: files come through a FileSource at one commit, and the same
// bytes always give the same plan or the same diagnostics. It never runs
// anything and reaches no network; the platform fetches the file, compiles
// it, and stores the JobSpecs with the run, so an old commit rebuilds with
// the pipeline it had.
//
// Each file format has a front end; all produce the same Plan. This
// version reads the native format (FormatNative). Formats are chosen by
// Options.Format or detected from the file name with Detect.
//
// # The native format
//
// A `.cikit.yml` (or `.cikit.yaml`) file at the repository root:
//
//	stages: [build, test]          # optional
//	env: {GOFLAGS: -mod=mod}       # optional, for every job
//	jobs:
//	  build:
//	    name: Build it             # optional, defaults to the ID
//	    stage: build               # optional, defaults to the first stage
//	    image: golang:1.26         # optional
//	    env: {CGO_ENABLED: 0}      # overlays the pipeline's env
//	    steps:
//	      - go build ./...         # a command; its first line names it
//	      - name: vet              # or a mapping with run, name and env
//	        run: go vet ./...
//	    timeout: 10m               # optional, a Go duration
//	  unit:
//	    stage: test
//	    needs: [build]             # job IDs, or one ID
//	    allow_failure: true        # dependents run even if it fails
//	    steps: [go test ./...]
//
// Stages are barriers: a job without a needs key needs every job of the
// nearest earlier stage that has jobs. A job with a needs key, even
// `needs: []`, needs exactly what it names and may start before the
// barrier. JobSpec.Needs holds the effective needs either way, so runners
// and schedulers never see stages.
//
// Env values keep the text they were written with (`1.10` stays "1.10");
// a null value is the empty string. Aliases and merge keys (`<<: *base`,
// `<<: [*a, *b]`) are resolved by the compiler, within a fixed budget, so
// a small file cannot expand into a large one.
//
// # Diagnostics
//
// Mistakes in a file are Diagnostics, not errors: Compile reports all of
// them, sorted by position, each with a file:line:col position, a stable
// Rule identifier (the Rule constants) and a message that names the valid
// keys, stages or jobs and suggests the nearest one to a typo. A plan is
// returned exactly when there are none. Compile's error is kept for what
// the file's author cannot fix: an unreadable file, an unknown format.
//
// Untrusted files are expected: the compiler does not panic on any input,
// and bounds the work an input can cause (aliases, implied needs, hints).
//
// # Stability
//
// Compile, CompileBytes, Plan, Diagnostic, FileSource and the Rule
// identifiers are stable: later versions add formats, keys and rules, and
// do not change what a valid file means. Messages may be reworded. A file
// that compiles today compiles to the same JobSpecs tomorrow, since stored
// runs are replayed from them.
package compiler
