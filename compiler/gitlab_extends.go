package compiler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// GitLab builds a job in three steps, in this order: includes are merged
// into the file, extends are merged into the jobs, and then !reference
// tags are replaced by the values they name, which therefore see extends.

// Limits of includes, extends and references: GitLab's own.
const (
	maxIncludes       = 150 // files read through include, nested ones counted
	maxExtendsDepth   = 10  // levels of extends
	maxReferenceDepth = 10  // levels of !reference inside referenced values
)

// includes merges the files cfg includes into it, GitLab style: the
// included files in the order listed, each with its own includes, then
// cfg itself over them. file is the file cfg was read from.
func (g *glFront) includes(cfg *glv, file string) *glv {
	e := cfg.entry("include")
	if e == nil {
		return cfg
	}
	rest := cfg.without("include")
	g.including = append(g.including, file)
	defer func() { g.including = g.including[:len(g.including)-1] }()
	var merged *glv
	for _, item := range g.seqOf(e.val, false) {
		if content := g.include(item); content != nil {
			merged = g.deepMerge(merged, content)
		}
	}
	return g.deepMerge(merged, rest)
}

var glIncludeKeys = []string{"cache", "component", "file", "inputs", "integrity", "local", "project", "ref", "remote", "rules", "template"}

// include reads one include entry and returns the configuration it brings,
// nil when it brings none.
func (g *glFront) include(item *glv) *glv {
	var local, other *glv
	var otherKind string
	var inputs *glv
	var rules []*glRule
	switch {
	case item.kind == glScalar && item.tag() != "!!str":
		g.gat(item, RuleType, "an include must be a path or a mapping such as {local: path}, got %s", item.what())
		return nil
	case item.kind == glScalar:
		if strings.HasPrefix(item.text, "https://") || strings.HasPrefix(item.text, "http://") {
			other, otherKind = item, "remote"
		} else {
			local = item
		}
	case item.kind == glMap:
		for _, k := range item.keys {
			switch k.name {
			case "local":
				local = k.val
			case "remote", "template", "project", "component":
				if other == nil {
					other, otherKind = k.val, k.name
				}
			case "inputs":
				inputs = k.val
			case "rules":
				rules = g.rules(k.val, ruleInclude)
			case "file", "ref", "integrity", "cache":
				// Parts of project and remote includes.
			default:
				g.unknownGLKey(k, "in include", glIncludeKeys)
			}
		}
		if local != nil && other != nil || local == nil && other == nil {
			g.gat(item, RuleInclude, "an include needs exactly one of local, remote, template, project or component")
			return nil
		}
	default:
		g.gat(item, RuleType, "an include must be a path or a mapping such as {local: path}, got %s", item.what())
		return nil
	}
	if rules != nil && !g.decideRules(rules, g.vars).in {
		return nil
	}
	if other != nil {
		// A pure compiler reads the repository through its FileSource and
		// nothing else. What these includes bring is not in the plan; a
		// reference to it is reported where it is made.
		if _, ok := g.str(other, otherKind); ok {
			g.offline = append(g.offline, other)
		}
		return nil
	}
	p, ok := g.str(local, "local")
	if !ok || strings.TrimSpace(p) == "" {
		if ok {
			g.gat(local, RuleInclude, "an include needs a file path")
		}
		return nil
	}
	expanded, known := g.vars.expand(p)
	switch {
	case !known:
		g.gat(local, RuleInclude, "cannot resolve the variables of included file %q: their values are not known when the pipeline compiles", p)
		g.incomplete = true
		return nil
	case isGlob(expanded):
		g.gat(local, RuleInclude, "cannot include %q: the compiler reads files one by one and cannot list the files a pattern matches", p)
		g.incomplete = true
		return nil
	}
	path := strings.TrimPrefix(expanded, "/")
	if slices.Contains(g.including, path) {
		g.gat(local, RuleInclude, "include loop: %s → %s", strings.Join(g.including, " → "), path)
		return nil
	}
	g.included++
	if g.included > maxIncludes {
		g.gat(local, RuleLimit, "the pipeline includes more than %d files", maxIncludes)
		g.incomplete = true
		return nil
	}
	data, ok := g.readFile(path, local.n)
	if !ok {
		g.incomplete = true
		return nil
	}
	var content *glv
	g.within(path, func() {
		header, root, ok := g.parseIncluded(data)
		if !ok {
			g.incomplete = true
			return
		}
		if root == nil {
			return
		}
		content = g.glConvert(root, path)
		if header != nil || inputs != nil {
			content = g.interpolate(content, g.inputValues(header, inputs, local, path))
		}
		if content.kind != glMap {
			g.gat(content, RuleType, "an included file must be a mapping of keywords and jobs, got %s", content.what())
			content = nil
		}
	})
	if content == nil {
		return nil
	}
	return g.includes(content, path)
}

// parseIncluded parses an included file: one document, or a spec header
// (a mapping with only "spec") and the configuration after "---".
func (g *glFront) parseIncluded(data []byte) (header, root *yaml.Node, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for len(docs) < 3 {
		var doc yaml.Node
		err := decode(dec, &doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			g.syntaxError(err, data)
			return nil, nil, false
		}
		n := &doc
		if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
			n = doc.Content[0]
		}
		docs = append(docs, n)
	}
	isHeader := func(n *yaml.Node) bool {
		return n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "spec"
	}
	switch {
	case len(docs) == 0:
		return nil, nil, true
	case len(docs) == 1:
		return nil, docs[0], true
	case len(docs) == 2 && isHeader(docs[0]):
		return docs[0], docs[1], true
	}
	g.at(docs[1], RuleSyntax, "the file holds more than one YAML document; an included file is a single document, or a spec header and the configuration after ---")
	return nil, nil, false
}

// inputValues returns the values of a file's inputs: those the include
// gives, then the defaults its spec declares.
func (g *glFront) inputValues(header *yaml.Node, given *glv, at *glv, path string) map[string]*glv {
	out := map[string]*glv{}
	declared := map[string]bool{}
	var names []string
	if header != nil {
		spec := g.glConvert(header, path).get("spec")
		for _, in := range spec.get("inputs").keysOrNil() {
			declared[in.name] = true
			names = append(names, in.name)
			if def := in.val.get("default"); def != nil {
				out[in.name] = def
			}
		}
	}
	if given != nil && given.kind != glMap && !given.isNull() {
		g.gat(given, RuleType, `"inputs" must be a mapping of input names to values, got %s`, given.what())
		given = nil
	}
	for _, k := range given.keysOrNil() {
		if header != nil && !declared[k.name] {
			g.at(k.key, RuleValue, "%s declares no input %q%s (inputs: %s)", path, k.name, didYouMean(g.suggest(k.name, names)), list(names))
			continue
		}
		out[k.name] = k.val
	}
	for _, n := range names {
		if out[n] == nil {
			g.gat(at, RuleValue, "%s needs input %q, which has no default", path, n)
		}
	}
	return out
}

func (v *glv) keysOrNil() []glEntry {
	if v == nil || v.kind != glMap {
		return nil
	}
	return v.keys
}

var inputRef = regexp.MustCompile(`\$\[\[\s*inputs\.([\w-]+)\s*((?:\|[^\]]*)?)\]\]`)

// interpolate replaces $[[ inputs.name ]] in the scalars of v. A scalar
// that is one reference becomes the input's value, whatever its type;
// a reference within text becomes the input's text.
func (g *glFront) interpolate(v *glv, inputs map[string]*glv) *glv {
	switch v.kind {
	case glScalar:
		if !strings.Contains(v.text, "$[[") {
			return v
		}
		if m := inputRef.FindStringSubmatchIndex(v.text); m != nil && m[0] == 0 && m[1] == len(v.text) && m[4] == m[5] {
			name := v.text[m[2]:m[3]]
			if in, ok := inputs[name]; ok {
				out := *in
				out.n = v.n
				return &out
			}
		}
		out := *v
		out.text = g.interpolateText(v, v.text, inputs)
		return &out
	case glSeq, glRef:
		out := *v
		out.items = make([]*glv, len(v.items))
		for i, it := range v.items {
			out.items[i] = g.interpolate(it, inputs)
		}
		return &out
	case glMap:
		out := *v
		out.keys = make([]glEntry, len(v.keys))
		for i, k := range v.keys {
			name := k.name
			if strings.Contains(name, "$[[") {
				name = g.interpolateText(&glv{kind: glScalar, n: k.key}, name, inputs)
			}
			out.keys[i] = glEntry{name: name, key: k.key, val: g.interpolate(k.val, inputs)}
		}
		return &out
	}
	return v
}

// interpolateText replaces the input references within text s, written
// at v, by the inputs' text.
func (g *glFront) interpolateText(v *glv, s string, inputs map[string]*glv) string {
	return inputRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := inputRef.FindStringSubmatch(ref)
		in, ok := inputs[m[1]]
		if !ok {
			g.gat(v, RuleValue, "unknown input %q", m[1])
			return ref
		}
		if in.kind != glScalar && !in.isNull() {
			g.gat(v, RuleType, "input %q is a %s and cannot be part of a string", m[1], in.what())
			return ref
		}
		return applyInputFuncs(in.text, m[2])
	})
}

// applyInputFuncs applies the functions of an interpolation, such as
// "| truncate(0,8)". expand_vars and posix_escape are for the runner's
// shell and are left to it.
func applyInputFuncs(s, funcs string) string {
	for _, f := range strings.Split(funcs, "|") {
		f = strings.TrimSpace(f)
		args, ok := strings.CutPrefix(f, "truncate(")
		if !ok {
			continue
		}
		a, b, _ := strings.Cut(strings.TrimSuffix(args, ")"), ",")
		off, err1 := strconv.Atoi(strings.TrimSpace(a))
		n, err2 := strconv.Atoi(strings.TrimSpace(b))
		if err1 != nil || err2 != nil || off < 0 || n < 0 {
			continue
		}
		r := []rune(s)
		off = min(off, len(r))
		s = string(r[off:min(len(r), off+n)])
	}
	return s
}

// extendedValue returns the value of the top-level key name with what it
// extends merged in, without the extends key; nil when there is no such
// key. GitLab's merge: mappings merge key by key, anything else is
// replaced; a later parent wins over an earlier one, the job over all.
func (g *glFront) extendedValue(name string) *glv {
	return g.extendedFrom(name, nil)
}

func (g *glFront) extendedFrom(name string, chain []string) *glv {
	if v, ok := g.extended[name]; ok {
		return v
	}
	e := g.named[name]
	if e == nil {
		return nil
	}
	v := e.val
	ext := v.entry("extends")
	if ext == nil {
		g.extended[name] = v
		return v
	}
	chain = append(chain, name)
	result := v.without("extends")
	if len(chain) > maxExtendsDepth+1 {
		// Deeper than any valid chain: stop here, the job that
		// exceeds the limit is reported below.
		g.extended[name] = result
		g.extDepth[name] = extendsTooDeep
		return result
	}
	g.extending[name] = true
	defer delete(g.extending, name)
	var parents []*glv
	if ext.val.kind == glSeq {
		parents = ext.val.items
	} else if !ext.val.isNull() {
		parents = []*glv{ext.val}
	}
	depth, deepest := 1, ""
	for i := len(parents) - 1; i >= 0; i-- {
		p := parents[i]
		pname, ok := g.text(p)
		if !ok {
			g.gat(p, RuleType, "extends must name a job or a list of jobs, got %s", p.what())
			continue
		}
		if g.extending[pname] {
			loop := append(slices.Clone(chain[slices.Index(chain, pname):]), pname)
			g.gat(p, RuleExtends, "extends loop: %s", strings.Join(loop, " → "))
			continue
		}
		pv := g.extendedFrom(pname, chain)
		switch {
		case pv == nil:
			g.unknownName(p, RuleExtends, "extends unknown job %q", pname, slices.DeleteFunc(g.templateNames(), func(n string) bool { return n == name }))
			continue
		case pv.kind != glMap:
			g.gat(p, RuleExtends, "extends %q, which is not a job but a value of type %s", pname, pv.what())
			continue
		}
		result = g.deepMerge(pv, result)
		if d := g.extDepth[pname]; d+1 > depth {
			depth, deepest = d+1, pname
		}
	}
	switch {
	case depth > extendsTooDeep:
		depth = extendsTooDeep
	case depth == extendsTooDeep:
		path := []string{name}
		for n := deepest; n != "" && len(path) <= maxExtendsDepth+1; n = g.extDeepest[n] {
			path = append(path, n)
		}
		g.gat(ext.val, RuleExtends, "extends nest more than %d levels deep: %s", maxExtendsDepth, strings.Join(path, " → "))
	}
	g.extended[name] = result
	g.extDepth[name], g.extDeepest[name] = depth, deepest
	return result
}

// extendsTooDeep is the depth of extends past GitLab's limit; deeper ones
// count as this deep, so that only the first job past it is reported.
const extendsTooDeep = maxExtendsDepth + 1

// templateNames are the names extends and !reference may use.
func (g *glFront) templateNames() []string {
	names := make([]string, 0, len(g.top.keys))
	for _, e := range g.top.keys {
		if !slices.Contains(glTopKeys, e.name) || e.name == "default" {
			names = append(names, e.name)
		}
	}
	return names
}

// unknownName reports a name that refers to nothing: a parent in
// extends, a job in !reference, needs or dependencies. When a local
// include failed, the name may be defined there and is not reported
// again; when includes were not read, the message says so.
func (g *glFront) unknownName(at *glv, rule, format, name string, names []string) {
	if g.incomplete {
		return
	}
	msg := fmt.Sprintf(format, name) + didYouMean(g.suggest(name, names))
	if len(g.offline) > 0 {
		msg += "; it may come from an include the compiler cannot read (line " + strconv.Itoa(g.offline[0].n.Line) + "): it reads only local files"
	}
	g.gat(at, rule, "%s", msg)
}

// maxDerefs bounds the values !reference tags copy, like the alias budget.
const maxDerefs = maxAliasNodes

// deref returns v with its !reference tags replaced by the values they
// name. Values without tags are returned as they are.
func (g *glFront) deref(v *glv) *glv {
	return g.derefIn(v, nil)
}

// derefIn resolves the tags of v, chain being the references being
// resolved (for loops). Outside references, values resolve the same
// wherever they are, so the result is remembered: extends and default
// share values between many jobs.
func (g *glFront) derefIn(v *glv, chain []string) *glv {
	if chain != nil {
		return g.derefWalk(v, chain)
	}
	if r, ok := g.derefed[v]; ok {
		return r
	}
	r := g.derefWalk(v, nil)
	if g.derefed == nil {
		g.derefed = make(map[*glv]*glv)
	}
	g.derefed[v] = r
	return r
}

func (g *glFront) derefWalk(v *glv, chain []string) *glv {
	switch v.kind {
	case glRef:
		return g.resolveRef(v, chain)
	case glSeq:
		var out *glv
		for i, it := range v.items {
			r := g.derefIn(it, chain)
			if r != it && out == nil {
				out = &glv{kind: glSeq, n: v.n, items: slices.Clone(v.items)}
			}
			if out != nil {
				out.items[i] = r
			}
		}
		if out != nil {
			return out
		}
	case glMap:
		var out *glv
		for i, k := range v.keys {
			r := g.derefIn(k.val, chain)
			if r != k.val && out == nil {
				out = &glv{kind: glMap, n: v.n, keys: slices.Clone(v.keys)}
			}
			if out != nil {
				out.keys[i].val = r
			}
		}
		if out != nil {
			return out
		}
	}
	return v
}

// resolveRef returns the value a !reference tag names: [job, key, …],
// looked up in the job with its extends merged in.
func (g *glFront) resolveRef(r *glv, chain []string) *glv {
	null := &glv{kind: glBad, n: r.n}
	path := make([]string, 0, len(r.items))
	for _, it := range r.items {
		s, ok := g.text(it)
		if !ok {
			g.gat(it, RuleReference, "the path of a !reference tag must be names, got %s", it.what())
			return null
		}
		path = append(path, s)
	}
	if len(path) == 0 {
		g.gat(r, RuleReference, "a !reference tag needs a job and optionally keys: !reference [job, key]")
		return null
	}
	key := strings.Join(path, "\x00")
	if slices.Contains(chain, key) {
		g.gat(r, RuleReference, "!reference loop: [%s] refers to itself", strings.Join(path, ", "))
		return null
	}
	if len(chain) >= maxReferenceDepth {
		g.gat(r, RuleReference, "!reference tags nest more than %d levels deep", maxReferenceDepth)
		return null
	}
	g.derefs++
	if g.derefs > maxDerefs {
		g.gat(r, RuleLimit, "!reference tags are resolved more than %d times; use fewer", maxDerefs)
		panic(abort{})
	}
	v := g.extendedValue(path[0])
	if v == nil {
		g.unknownName(r.items[0], RuleReference, "!reference to unknown job %q", path[0], g.templateNames())
		return null
	}
	for i, k := range path[1:] {
		if v.kind != glMap {
			g.gat(r.items[i+1], RuleReference, "!reference [%s]: %s is a %s, which has no key %q", strings.Join(path, ", "), strings.Join(path[:i+1], "."), v.what(), k)
			return null
		}
		next := v.get(k)
		if next == nil {
			var keys []string
			for _, e := range v.keys {
				keys = append(keys, e.name)
			}
			g.gat(r.items[i+1], RuleReference, "!reference [%s]: %s has no key %q%s", strings.Join(path, ", "), strings.Join(path[:i+1], "."), k, didYouMean(g.suggest(k, keys)))
			return null
		}
		v = next
	}
	return g.derefIn(v, append(chain, key))
}
