package compiler_test

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/compiler"
)

var update = flag.Bool("update", false, "rewrite the golden .out files from the compiler's output")

// goldenDirs are the directories of golden files and the format of each.
// Every file compiles through Compile over a FileSource of its directory,
// so that the files it includes or calls are read from beside it.
var goldenDirs = []struct {
	dir    string
	format compiler.Format
	// path is the path the files are compiled as, from their base name.
	path func(base string) string
	// source reads them, and the files they refer to, from the directory.
	source func(dir string) compiler.FileSource
}{
	{"native", compiler.FormatNative,
		func(base string) string { return base },
		func(dir string) compiler.FileSource { return compiler.DirSource(dir) }},
	{"gitlab", compiler.FormatGitLab,
		func(base string) string { return base },
		func(dir string) compiler.FileSource { return compiler.DirSource(dir) }},
	{"github", compiler.FormatGitHub,
		func(base string) string { return ".github/workflows/" + base },
		func(dir string) compiler.FileSource { return workflowSource(dir) }},
}

// TestGolden compiles every testdata/<format>/*.yml and compares a summary
// of the plan, or the diagnostics, with the .out file next to it. GitHub
// workflows are compiled as .github/workflows/<name>, and the workflows
// they call are read from the same directory. A line "# event: {…}" in a
// file, the JSON of a compiler.Event, compiles it for that event instead
// of without one; several such lines compile it once for each, one
// section of the .out file each.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, gd := range goldenDirs {
		files, err := filepath.Glob(filepath.Join("testdata", gd.dir, "*.yml"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
		src := gd.source(filepath.Join("testdata", gd.dir))
		for _, file := range files {
			name := filepath.Base(file)
			t.Run(gd.dir+"/"+strings.TrimSuffix(name, ".yml"), func(t *testing.T) {
				t.Parallel()
				data, err := os.ReadFile(file)
				require.NoError(t, err)
				var got strings.Builder
				events := goldenEvents(t, data)
				for _, ev := range events {
					if len(events) > 1 {
						fmt.Fprintf(&got, "=== event %s\n", ev.line)
					}
					opts := compiler.Options{Format: gd.format, Event: ev.event}
					plan, diags, err := compiler.Compile(t.Context(), src, gd.path(name), opts)
					require.NoError(t, err)
					got.WriteString(summary(plan, diags))
				}

				out := strings.TrimSuffix(file, ".yml") + ".out"
				if *update {
					require.NoError(t, os.WriteFile(out, []byte(got.String()), 0o644))
					return
				}
				want, err := os.ReadFile(out)
				require.NoError(t, err, "run go test -update to create it")
				if diff := gocmp.Diff(string(want), got.String()); diff != "" {
					t.Errorf("%s (-want +got):\n%s", out, diff)
				}
			})
		}
	}
}

// goldenEvent is an event a golden file is compiled for, and the line
// that asks for it.
type goldenEvent struct {
	line  string
	event *compiler.Event
}

// goldenEvents returns the events a golden file asks to be compiled for;
// "# event: none" (and a file without event lines) means no event.
func goldenEvents(t *testing.T, data []byte) []goldenEvent {
	t.Helper()
	var events []goldenEvent
	for line := range strings.Lines(string(data)) {
		js, ok := strings.CutPrefix(strings.TrimSpace(line), "# event: ")
		if !ok {
			continue
		}
		if js == "none" {
			events = append(events, goldenEvent{line: js})
			continue
		}
		ev := &compiler.Event{}
		dec := json.NewDecoder(strings.NewReader(js))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(ev), "event line %q", js)
		events = append(events, goldenEvent{line: js, event: ev})
	}
	if events == nil {
		events = []goldenEvent{{line: "none"}}
	}
	return events
}

// workflowSource reads .github/workflows/<name> from dir: the called
// workflows of golden and real-file tests, which live flat in one
// directory.
type workflowSource string

func (w workflowSource) ReadFile(ctx context.Context, p string) ([]byte, error) {
	name, ok := strings.CutPrefix(p, ".github/workflows/")
	if !ok || strings.Contains(name, "/") {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	return compiler.DirSource(w).ReadFile(ctx, name)
}

// summary renders a compilation result for a person to check: the plan
// field by field, or the diagnostics as a compiler prints them.
func summary(plan *compiler.Plan, diags []compiler.Diagnostic) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintln(&b, d)
	}
	if plan == nil {
		return b.String()
	}
	if plan.Name != "" {
		fmt.Fprintf(&b, "name: %q\n", plan.Name)
	}
	for _, t := range plan.Triggers {
		fmt.Fprintf(&b, "trigger %s\n", t.Event)
		render(&b, "  ", reflect.ValueOf(t))
	}
	if plan.Concurrency != nil {
		fmt.Fprintf(&b, "concurrency: %q cancel-in-progress=%t\n", plan.Concurrency.Group, plan.Concurrency.CancelInProgress)
	}
	fmt.Fprintf(&b, "stages: %s\n", cmp.Or(strings.Join(plan.Stages, ", "), "-"))
	fmt.Fprintf(&b, "env: %s\n", envString(plan.Env))
	g := plan.Graph()
	order := make([]string, 0, g.Len())
	for _, i := range g.Order() {
		order = append(order, g.Node(i).ID)
	}
	fmt.Fprintf(&b, "order: %s\n", strings.Join(order, ", "))
	for _, j := range plan.Jobs {
		fmt.Fprintf(&b, "\njob %s\n", j.ID)
		render(&b, "  ", reflect.ValueOf(*j))
	}
	return b.String()
}

// render writes the non-zero fields of struct v, one per line, named by
// their JSON names, so every field a front end fills shows up in the
// golden files without the summary having to know it.
func render(b *strings.Builder, indent string, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == "id" || name == "event" || fv.IsZero() && name != "needs" && name != "steps" {
			continue
		}
		fmt.Fprintf(b, "%s%s:", indent, name)
		renderValue(b, indent, fv)
	}
}

func renderValue(b *strings.Builder, indent string, v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeOf(time.Duration(0)):
		fmt.Fprintf(b, " %s\n", time.Duration(v.Int()))
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			b.WriteString(" -\n")
			return
		}
		renderValue(b, indent, v.Elem())
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		// JobSpec.Expand: what it keeps, not its bytes.
		var t struct {
			Job, File string
			Files     map[string]string
			Event     json.RawMessage
		}
		if err := json.Unmarshal(v.Bytes(), &t); err != nil {
			fmt.Fprintf(b, " invalid: %v\n", err)
			return
		}
		fmt.Fprintf(b, " job %q of %s, files [%s], event %t\n", t.Job, t.File, strings.Join(slices.Sorted(maps.Keys(t.Files)), ", "), t.Event != nil)
	case v.Type() == reflect.TypeOf(map[string]json.RawMessage(nil)):
		m := make(map[string]string, v.Len())
		for _, k := range v.MapKeys() {
			m[k.String()] = string(v.MapIndex(k).Bytes())
		}
		fmt.Fprintf(b, " %s\n", envString(m))
	case v.Type() == reflect.TypeOf(map[string][]string(nil)):
		// Artifacts.Reports: each type and its paths, sorted by type.
		m := v.Interface().(map[string][]string)
		parts := make([]string, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s=[%s]", k, strings.Join(m[k], ", ")))
		}
		fmt.Fprintf(b, " %s\n", strings.Join(parts, " "))
	case v.Kind() == reflect.Map && v.Type().Elem().Kind() == reflect.String:
		m := make(map[string]string, v.Len())
		for _, k := range v.MapKeys() {
			m[k.String()] = v.MapIndex(k).String()
		}
		fmt.Fprintf(b, " %s\n", envString(m))
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		b.WriteString("\n")
		for i := range v.Len() {
			var item strings.Builder
			render(&item, indent+"    ", v.Index(i))
			fmt.Fprintf(b, "%s  - %s", indent, strings.TrimPrefix(item.String(), indent+"    "))
		}
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range v.Len() {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		fmt.Fprintf(b, " [%s]\n", strings.Join(parts, ", "))
	case v.Kind() == reflect.Struct:
		b.WriteString("\n")
		render(b, indent+"  ", v)
	case v.Kind() == reflect.String:
		fmt.Fprintf(b, " %q\n", v.String())
	default:
		fmt.Fprintf(b, " %v\n", v.Interface())
	}
}

func envString(env map[string]string) string {
	if env == nil {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, env[k]))
	}
	return strings.Join(parts, " ")
}
