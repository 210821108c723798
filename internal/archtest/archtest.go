package archtest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// ListFormat is the go list -f template whose output Violations reads: a
// line per package, its import path followed by all its transitive
// dependencies, separated by spaces.
const ListFormat = "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"

// Violation is one package depending on one it must not.
type Violation struct {
	Package string // the importing package
	Dep     string // the forbidden dependency, direct or transitive
	Rule    string // why it is forbidden
}

func (v Violation) String() string {
	return fmt.Sprintf("%s depends on %s: %s", v.Package, v.Dep, v.Rule)
}

// Violations checks the packages of module in listing, the output of
// go list -deps -f ListFormat ./..., against the rules in the package
// documentation. Packages of other modules in listing are ignored. The
// result is sorted by package, then dependency.
func Violations(module, listing string) []Violation {
	reference := module + "/reference"
	artifacts, logs := module+"/artifacts", module+"/logs"
	var out []Violation
	for line := range strings.Lines(listing) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, deps := fields[0], fields[1:]
		if !within(pkg, module) {
			continue
		}
		mayUseReference := within(pkg, reference) || within(pkg, module+"/examples")
		for _, dep := range deps {
			switch {
			case pkg == module && within(dep, module):
				out = append(out, Violation{pkg, dep,
					"the root package is the shared vocabulary and imports no other package of the module"})
			case !mayUseReference && within(dep, reference):
				out = append(out, Violation{pkg, dep,
					"only reference/... and examples/... may import the reference platform"})
			case within(pkg, artifacts) && within(dep, logs):
				out = append(out, Violation{pkg, dep,
					"logs stores finished logs in artifacts' blob stores, so artifacts never imports logs"})
			}
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Package, b.Package), strings.Compare(a.Dep, b.Dep))
	})
	return out
}

// within reports whether pkg is path or below it; a sibling that merely
// shares the prefix, like reference2, is not.
func within(pkg, path string) bool {
	return pkg == path || strings.HasPrefix(pkg, path+"/")
}
