package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cikit/cikit/compiler"
	"github.com/cikit/cikit/dag"
)

func graphCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("graph", "graph [-format mermaid|dot] [-durations report.json] [file]\n\n"+
		"Prints the job graph of a pipeline, the critical path highlighted. Without durations every job\n"+
		"counts as one unit of time; with a report of an earlier `cikit run -report`, its real durations.", stderr)
	format := fs.String("format", "mermaid", "output format: mermaid or dot")
	durations := fs.String("durations", "", "a JSON report of `cikit run -report` whose job durations weigh the critical path")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *format != "mermaid" && *format != "dot" {
		fmt.Fprintf(stderr, "cikit graph: -format must be mermaid or dot, got %q\n", *format)
		return ExitInvalid
	}
	if fs.NArg() > 1 {
		fmt.Fprintf(stderr, "cikit graph: one pipeline file at a time, got %d\n", fs.NArg())
		return ExitInvalid
	}
	file := fs.Arg(0)
	if file == "" {
		f, err := findPipeline(".")
		if err != nil {
			fmt.Fprintf(stderr, "cikit graph: %v\n", err)
			return ExitInvalid
		}
		file = f
	}
	plan, diags, err := compiler.Compile(ctx, compiler.DirSource(filepath.Dir(file)), filepath.Base(file), compiler.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "cikit graph: %v\n", err)
		return ExitInvalid
	}
	for _, d := range diags {
		d.File = file
		fmt.Fprintln(stderr, d)
	}
	if compiler.HasErrors(diags) {
		return ExitInvalid
	}
	weights := map[string]time.Duration{}
	if *durations != "" {
		if weights, err = readDurations(*durations); err != nil {
			fmt.Fprintf(stderr, "cikit graph: -durations: %v\n", err)
			return ExitInvalid
		}
	}
	g := plan.Graph()
	path, total := g.CriticalPath(func(i int) time.Duration {
		if d, ok := weights[g.Node(i).ID]; ok {
			return d
		}
		if *durations != "" {
			return 0 // the job did not run in that report
		}
		return time.Second // one unit per job
	})
	labels := make([]string, g.Len())
	for i, j := range plan.Jobs {
		labels[i] = j.DisplayName()
	}
	width, _ := g.Width()
	summary := fmt.Sprintf("%d jobs, width %d, critical path %d jobs", g.Len(), width, len(path))
	if *durations != "" {
		summary += fmt.Sprintf(" taking %s", round(total))
	}
	if *format == "dot" {
		writeDOT(stdout, g, labels, path, summary)
	} else {
		writeMermaid(stdout, g, labels, path, summary)
	}
	return ExitOK
}

func readDurations(path string) (map[string]time.Duration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s is not a report of cikit run: %w", path, err)
	}
	out := make(map[string]time.Duration, len(r.Jobs))
	for _, j := range r.Jobs {
		out[j.ID] = j.Duration
	}
	return out, nil
}

// critical returns the set of nodes and of edges (parent, child) on path.
func critical(path []int) (map[int]bool, map[[2]int]bool) {
	nodes := make(map[int]bool, len(path))
	edges := make(map[[2]int]bool, len(path))
	for k, n := range path {
		nodes[n] = true
		if k > 0 {
			edges[[2]int{path[k-1], n}] = true
		}
	}
	return nodes, edges
}

func writeMermaid(w io.Writer, g *dag.Graph, labels []string, path []int, summary string) {
	onPath, onEdge := critical(path)
	fmt.Fprintf(w, "%%%% %s\nflowchart LR\n", summary)
	for _, i := range g.Order() {
		// #quot; is Mermaid's entity for a double quote inside a label.
		fmt.Fprintf(w, "  n%d[\"%s\"]\n", i, strings.ReplaceAll(labels[i], `"`, "#quot;"))
	}
	var hot []string
	edge := 0
	for _, i := range g.Order() {
		for _, p := range g.Parents(i) {
			fmt.Fprintf(w, "  n%d --> n%d\n", p, i)
			if onEdge[[2]int{p, i}] {
				hot = append(hot, fmt.Sprint(edge))
			}
			edge++
		}
	}
	if len(path) > 0 {
		var ns []string
		for _, i := range g.Order() {
			if onPath[i] {
				ns = append(ns, fmt.Sprintf("n%d", i))
			}
		}
		fmt.Fprintln(w, "  classDef critical stroke:#d33,stroke-width:3px")
		fmt.Fprintf(w, "  class %s critical\n", strings.Join(ns, ","))
	}
	if len(hot) > 0 {
		fmt.Fprintf(w, "  linkStyle %s stroke:#d33,stroke-width:3px\n", strings.Join(hot, ","))
	}
}

func writeDOT(w io.Writer, g *dag.Graph, labels []string, path []int, summary string) {
	onPath, onEdge := critical(path)
	quote := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	fmt.Fprintf(w, "// %s\ndigraph pipeline {\n  rankdir=LR;\n  node [shape=box, style=rounded];\n", summary)
	const hot = `, color="#dd3333", penwidth=3`
	for _, i := range g.Order() {
		attrs := ""
		if onPath[i] {
			attrs = hot
		}
		fmt.Fprintf(w, "  n%d [label=\"%s\"%s];\n", i, quote.Replace(labels[i]), attrs)
	}
	for _, i := range g.Order() {
		for _, p := range g.Parents(i) {
			if onEdge[[2]int{p, i}] {
				fmt.Fprintf(w, "  n%d -> n%d [%s];\n", p, i, strings.TrimPrefix(hot, ", "))
			} else {
				fmt.Fprintf(w, "  n%d -> n%d;\n", p, i)
			}
		}
	}
	fmt.Fprintln(w, "}")
}
