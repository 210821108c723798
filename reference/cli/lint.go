package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cikit/cikit/compiler"
)

func lintCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("lint", "lint [-format text|json] [file ...]\n\nWith no file, lints the pipeline file of the current directory.\n"+
		"Every finding exits 1: errors (the pipeline cannot run as written) and warnings (a condition that is\n"+
		"always false …). What the pipeline asks for that the platform accepts but does not honour yet (a container\n"+
		"image, caches, an action other than actions/checkout …) is printed under the rule \"unsupported\" and exits 0:\n"+
		"it is not a finding about the file; the runner also prints it at the top of the job's log.", stderr)
	format := fs.String("format", "text", "output format: text (file:line:col: message [rule]) or json")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "cikit lint: -format must be text or json, got %q\n", *format)
		return ExitInvalid
	}
	files := fs.Args()
	if len(files) == 0 {
		f, err := findPipeline(".")
		if err != nil {
			fmt.Fprintf(stderr, "cikit lint: %v\n", err)
			return ExitInvalid
		}
		files = []string{f}
	}
	var all []compiler.Diagnostic
	for _, f := range files {
		diags, err := lintFile(ctx, f)
		if err != nil {
			fmt.Fprintf(stderr, "cikit lint: %s: %v\n", f, err)
			return ExitInvalid
		}
		all = append(all, diags...)
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := make([]jsonDiagnostic, len(all))
		for i, d := range all {
			out[i] = jsonDiagnostic(d)
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "cikit lint: %v\n", err)
			return ExitInvalid
		}
	} else {
		for _, d := range all {
			fmt.Fprintln(stdout, d)
		}
	}
	for _, d := range all {
		// What the platform does not honour yet is said, but it is not
		// a finding about the file.
		if d.Rule != compiler.RuleUnsupported {
			return ExitFailed
		}
	}
	return ExitOK
}

// lintFile compiles the pipeline file f. A file below the current
// directory is read as the platform reads it, from the repository the
// current directory is the root of: its local includes, the files
// rules:exists names, the workflows it calls. Another file is compiled
// alone.
func lintFile(ctx context.Context, f string) ([]compiler.Diagnostic, error) {
	if filepath.IsLocal(f) {
		_, diags, err := compiler.Compile(ctx, compiler.DirSource("."), filepath.ToSlash(filepath.Clean(f)), compiler.Options{})
		return diags, err
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	_, diags, err := compiler.CompileBytes(f, data, compiler.Options{})
	return diags, err
}

type jsonDiagnostic struct {
	File     string            `json:"file"`
	Line     int               `json:"line"`
	Col      int               `json:"col"`
	Rule     string            `json:"rule"`
	Severity compiler.Severity `json:"severity"`
	Message  string            `json:"message"`
}

// pipelineFiles are the names `run`, `lint` and `graph` look for, in
// order, before GitHub workflows.
var pipelineFiles = []string{".cikit.yml", ".cikit.yaml", ".gitlab-ci.yml", ".gitlab-ci.yaml"}

// findPipeline returns the path, relative to dir and slash-separated, of
// dir's pipeline file: the first of pipelineFiles, else the only workflow
// under .github/workflows.
func findPipeline(dir string) (string, error) {
	for _, name := range pipelineFiles {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && !fi.IsDir() {
			return name, nil
		}
	}
	var workflows []string
	for _, pattern := range []string{"*.yml", "*.yaml"} {
		m, _ := filepath.Glob(filepath.Join(dir, ".github", "workflows", pattern))
		for _, f := range m {
			workflows = append(workflows, ".github/workflows/"+filepath.Base(f))
		}
	}
	switch len(workflows) {
	case 0:
		return "", fmt.Errorf("no pipeline file in %s (looked for %s and .github/workflows/*.yml)", dir, strings.Join(pipelineFiles, ", "))
	case 1:
		return workflows[0], nil
	}
	return "", fmt.Errorf("%s has %d workflows (%s); choose one with -file", dir, len(workflows), strings.Join(workflows, ", "))
}
