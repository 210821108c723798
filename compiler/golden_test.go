package compiler_test

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
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

// goldenDirs are the directories of golden files and the format of their
// files. Every file compiles through Compile over a DirSource of its
// directory, so that the files it includes are read from beside it (from
// subdirectories, which the glob does not visit).
var goldenDirs = []struct {
	dir    string
	format compiler.Format
}{
	{"native", compiler.FormatNative},
	{"gitlab", compiler.FormatGitLab},
}

// TestGolden compiles every testdata/<dir>/*.yml and compares a summary of
// the plan, or the diagnostics, with the .out file next to it. A line
// "# event: {…}" in a file, the JSON of a compiler.Event, compiles it for
// that event instead of without one; several such lines compile it once
// for each, one section of the .out file each.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, gd := range goldenDirs {
		dir := filepath.Join("testdata", gd.dir)
		files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
		require.NoError(t, err)
		require.NotEmpty(t, files)
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
					plan, diags, err := compiler.Compile(t.Context(), compiler.DirSource(dir), name, opts)
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

// summary renders a compilation result for a person to check: the plan
// field by field, or the diagnostics as a compiler prints them.
func summary(plan *compiler.Plan, diags []compiler.Diagnostic) string {
	var b strings.Builder
	if plan == nil {
		for _, d := range diags {
			fmt.Fprintln(&b, d)
		}
		return b.String()
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
		if name == "id" || fv.IsZero() && name != "needs" && name != "steps" {
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
