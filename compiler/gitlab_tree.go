package compiler

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// GitLab's configuration is not read where it is written: included files
// are merged into the main one, jobs inherit their `extends` parents and
// `default`, and `!reference` tags copy values from elsewhere. The front end
// therefore first turns the YAML into a small tree of its own, glv, which
// it can merge without touching the parsed nodes, and which remembers for
// every value the node it was written as, so that findings land where the
// author wrote the value, in whichever file that is.

type glKind uint8

const (
	glNull glKind = iota
	glScalar
	glSeq
	glMap
	glRef // a !reference tag: items are the path, as scalars
	// glBad stands for a value that could not be resolved (a broken
	// !reference), already reported: readers take it as not set.
	glBad
)

// glv is one value of the configuration. Values are never modified once
// built: merges and resolutions build new ones, sharing what they do not
// change, so one value may appear at several places of the tree.
type glv struct {
	kind  glKind
	n     *yaml.Node // where it is written; never nil
	text  string     // scalars
	items []*glv     // glSeq, glRef
	keys  []glEntry  // glMap, in order
}

// glEntry is one key of a mapping.
type glEntry struct {
	name string
	key  *yaml.Node
	val  *glv
}

// get returns the value of key name, or nil.
func (v *glv) get(name string) *glv {
	if v == nil || v.kind != glMap {
		return nil
	}
	for i := range v.keys {
		if v.keys[i].name == name {
			return v.keys[i].val
		}
	}
	return nil
}

// entry returns the entry of key name, or nil.
func (v *glv) entry(name string) *glEntry {
	if v == nil || v.kind != glMap {
		return nil
	}
	for i := range v.keys {
		if v.keys[i].name == name {
			return &v.keys[i]
		}
	}
	return nil
}

// without returns mapping v without the keys named.
func (v *glv) without(names ...string) *glv {
	out := *v
	out.keys = make([]glEntry, 0, len(v.keys))
	for _, e := range v.keys {
		drop := false
		for _, n := range names {
			drop = drop || e.name == n
		}
		if !drop {
			out.keys = append(out.keys, e)
		}
	}
	return &out
}

func (v *glv) isNull() bool { return v == nil || v.kind == glNull || v.kind == glBad }

// tag is the YAML tag of a scalar ("!!str", "!!int" …).
func (v *glv) tag() string { return v.n.ShortTag() }

// what names the type of v for messages.
func (v *glv) what() string {
	switch v.kind {
	case glRef:
		return "!reference tag"
	case glNull:
		return "null"
	}
	return kindName(v.n)
}

// at reports a finding at v (nil: the top of the file).
func (c *checker) gat(v *glv, rule, format string, args ...any) {
	if v == nil {
		c.at(nil, rule, format, args...)
		return
	}
	c.at(v.n, rule, format, args...)
}

// glTree converts a parsed YAML node, resolving aliases (within the alias
// budget) and merge keys. Nodes of files other than the compiled one are
// recorded in c.nodeFiles, so findings about them name their file. memo
// shares the conversion of nodes reached through several aliases.
type glTree struct {
	c          *checker
	file       string // "" for the compiled file
	memo       map[*yaml.Node]*glv
	converting map[*yaml.Node]bool // mappings being converted, for loops
}

func (c *checker) glConvert(n *yaml.Node, file string) *glv {
	t := &glTree{c: c, file: file, memo: make(map[*yaml.Node]*glv), converting: make(map[*yaml.Node]bool)}
	if n == nil {
		return &glv{kind: glNull, n: nullNode}
	}
	return t.conv(n, 0)
}

// maxGitLabDepth bounds the nesting of values. Real files nest a handful of
// levels; the bound keeps recursion over hostile files shallow.
const maxGitLabDepth = 100

func (t *glTree) conv(n *yaml.Node, depth int) *glv {
	r := t.c.resolve(n)
	if v, ok := t.memo[r]; ok {
		return v
	}
	if depth > maxGitLabDepth {
		t.c.at(n, RuleLimit, "values nest more than %d levels deep", maxGitLabDepth)
		panic(abort{})
	}
	if t.file != "" {
		t.c.nodeFile(r, t.file)
	}
	v := &glv{n: r}
	switch {
	case r.Kind == yaml.ScalarNode && isNull(r):
		v.kind = glNull
	case r.Kind == yaml.ScalarNode:
		v.kind, v.text = glScalar, r.Value
		if tag := r.ShortTag(); strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
			t.c.at(r, RuleType, "unknown YAML tag %q: GitLab knows only !reference", tag)
		}
	case r.Kind == yaml.SequenceNode:
		v.kind = glSeq
		if r.Tag == "!reference" {
			v.kind = glRef
		} else if tag := r.ShortTag(); strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
			t.c.at(r, RuleType, "unknown YAML tag %q: GitLab knows only !reference", tag)
		}
		v.items = make([]*glv, len(r.Content))
		for i, item := range r.Content {
			v.items[i] = t.conv(item, depth+1)
		}
	case r.Kind == yaml.MappingNode:
		v.kind = glMap
		if tag := r.ShortTag(); strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
			t.c.at(r, RuleType, "unknown YAML tag %q: GitLab knows only !reference", tag)
		}
		if t.converting[r] {
			t.c.at(n, RuleAlias, "merge key includes the mapping it is in")
			return &glv{kind: glNull, n: r}
		}
		t.converting[r] = true
		v.keys = t.mapping(r, depth)
		delete(t.converting, r)
	default:
		v.kind = glNull
	}
	t.memo[r] = v
	return v
}

// mapping converts the pairs of mapping m with merge keys resolved as
// GitLab's YAML library (Ruby's Psych) resolves them, which is not quite
// YAML 1.1: pairs apply in order, each "<<" writing the keys of its
// mappings over those already there, and each key over what came before
// it. A mapping with two merge keys, as real files write them, thus gets
// the later one's values; in a list of mappings, the earlier wins. A key
// written twice is reported, as for every format.
func (t *glTree) mapping(m *yaml.Node, depth int) []glEntry {
	var keys []glEntry
	index := make(map[string]int, len(m.Content)/2)
	set := func(e glEntry) {
		if i, ok := index[e.name]; ok {
			keys[i] = e
			return
		}
		index[e.name] = len(keys)
		keys = append(keys, e)
	}
	written := make(map[string]*yaml.Node, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		keyNode, valNode := m.Content[i], m.Content[i+1]
		k := t.c.resolve(keyNode)
		if isMergeKey(k) {
			sources := t.c.mergeSources(valNode)
			for j := len(sources) - 1; j >= 0; j-- {
				if sources[j] == m {
					t.c.at(keyNode, RuleAlias, "merge key includes the mapping it is in")
					continue
				}
				for _, e := range t.conv(sources[j], depth+1).keys {
					set(e)
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			t.c.at(keyNode, RuleType, "mapping keys must be strings, got %s", kindName(k))
			continue
		}
		if first, dup := written[k.Value]; dup {
			t.c.at(keyNode, RuleSyntax, "key %q is already defined at line %d", k.Value, first.Line)
			continue
		}
		written[k.Value] = keyNode
		if t.file != "" {
			t.c.nodeFile(keyNode, t.file)
		}
		set(glEntry{name: k.Value, key: keyNode, val: t.conv(valNode, depth+1)})
	}
	return keys
}

// nodeFile records that node n belongs to file, for findings about it.
func (c *checker) nodeFile(n *yaml.Node, file string) {
	if c.nodeFiles == nil {
		c.nodeFiles = make(map[*yaml.Node]string)
	}
	c.nodeFiles[n] = file
}

// maxMergeWork bounds the entries deep merges may copy, summed over the
// compilation: merges copy the mappings they change, and extends chains
// over large templates could otherwise multiply a small file.
const maxMergeWork = 1_000_000

// deepMerge returns base overlaid by over the way GitLab merges includes
// and extends: mappings merge key by key, recursively; anything else in
// over replaces what base has. Keys keep base's order; keys new in over
// follow.
func (g *glFront) deepMerge(base, over *glv) *glv {
	if base == nil {
		return over
	}
	if over == nil {
		return base
	}
	if base.kind != glMap || over.kind != glMap {
		return over
	}
	g.mergeWork += len(base.keys) + len(over.keys)
	if g.mergeWork > maxMergeWork {
		g.gat(over, RuleLimit, "merging includes and extends copies more than %d keys; the pipeline is too large", maxMergeWork)
		panic(abort{})
	}
	out := &glv{kind: glMap, n: over.n, keys: make([]glEntry, 0, len(base.keys)+len(over.keys))}
	out.keys = append(out.keys, base.keys...)
	index := make(map[string]int, len(base.keys))
	for i, e := range base.keys {
		index[e.name] = i
	}
	for _, e := range over.keys {
		if i, ok := index[e.name]; ok {
			out.keys[i] = glEntry{name: e.name, key: e.key, val: g.deepMerge(out.keys[i].val, e.val)}
			continue
		}
		index[e.name] = len(out.keys)
		out.keys = append(out.keys, e)
	}
	return out
}

func isBad(v *glv) bool { return v.kind == glBad }

// hasBad reports whether v is or lists (in nested lists) a value that
// could not be resolved.
func hasBad(v *glv) bool {
	if v == nil {
		return false
	}
	if v.kind == glSeq {
		return slices.ContainsFunc(v.items, hasBad)
	}
	return v.kind == glBad
}

// seqOf returns the items of a list, or v alone for a scalar or mapping:
// many GitLab keys take one value or a list of them. Nested lists are
// flattened when flat is set (scripts and rules may nest lists, which
// !reference produces), up to GitLab's ten levels.
func (g *glFront) seqOf(v *glv, flat bool) []*glv {
	if v.isNull() {
		return nil
	}
	if v.kind != glSeq {
		return []*glv{v}
	}
	if !flat {
		if !slices.ContainsFunc(v.items, isBad) {
			return v.items
		}
		return slices.DeleteFunc(slices.Clone(v.items), isBad)
	}
	var out []*glv
	var walk func(items []*glv, level int)
	walk = func(items []*glv, level int) {
		for _, it := range items {
			if it.kind == glSeq {
				if level >= 10 {
					g.gat(it, RuleType, "lists nest more than 10 levels deep")
					continue
				}
				walk(it.items, level+1)
				continue
			}
			if !isBad(it) {
				out = append(out, it)
			}
		}
	}
	walk(v.items, 1)
	return out
}
