package compiler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The YAML layer works on yaml.v3's node tree rather than decoding into
// structs, for positions and because decoding would hide what the
// diagnostics need to see: duplicate keys, the type a value was written
// with, and aliases, which decoding expands without a budget we control.

// nullNode stands for a value that is absent or cannot be resolved. It has
// no position, so findings about it land at the top of the file.
var nullNode = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}

var yamlErrLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are the messages of yaml.v3's parser, as opposed to its
// scanner. The parser reports 0-based lines (the scanner 1-based ones), so
// the line of these is one more than the error says.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// parseYAML returns the root node of the file's only document, nil for a
// file with no document. ok is false when the file is not YAML.
func (c *checker) parseYAML(data []byte) (root *yaml.Node, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := decode(dec, &doc); {
	case errors.Is(err, io.EOF):
		return nil, true
	case err != nil:
		c.syntaxError(err, data)
		return nil, false
	}
	var next yaml.Node
	switch err := decode(dec, &next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		c.syntaxError(err, data)
		return nil, false
	default:
		c.at(&next, RuleSyntax, "the file holds more than one YAML document; a pipeline is a single document")
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		return doc.Content[0], true
	}
	return &doc, true
}

// decode is dec.Decode with a guard: the parser is third-party code fed
// untrusted bytes, and a panic in it must cost one diagnostic, not the
// process.
func decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("yaml: the YAML parser failed on this file (%v)", v)
		}
	}()
	return dec.Decode(n)
}

func (c *checker) syntaxError(err error, data []byte) {
	msg := err.Error()
	line := 1
	if m := yamlErrLine.FindStringSubmatch(msg); m != nil {
		msg = m[2]
		if n, err := strconv.Atoi(m[1]); err == nil {
			line = n
			if parserProblems[msg] {
				line++
			}
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	col := 1
	// The parser gives no position for an unknown alias; the first place
	// it is written is almost always the one.
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		name = strings.TrimSuffix(name, "' referenced")
		if i := bytes.Index(data, []byte("*"+name)); i >= 0 {
			line = 1 + bytes.Count(data[:i], []byte("\n"))
			col = 1 + len([]rune(string(data[bytes.LastIndexByte(data[:i], '\n')+1:i])))
		}
	}
	c.report(line, col, RuleSyntax, "invalid YAML: %s", msg)
}

// resolve follows n through aliases to the node it stands for, charging
// the size of every aliased node to the alias budget. It never returns
// nil.
func (c *checker) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nullNode
		}
		c.aliasNodes += c.size(n.Alias)
		if c.aliasNodes > maxAliasNodes {
			c.at(n, RuleAlias, "aliases expand to more than %d YAML nodes; use fewer or smaller aliases", maxAliasNodes)
			panic(abort{})
		}
		n = n.Alias
	}
	if n == nil {
		return nullNode
	}
	return n
}

// size counts the nodes of the tree below n, counting nested aliases as
// one node (they are charged when they are followed). Sizes are memoized,
// so computing them is linear in the file whatever its anchors.
func (c *checker) size(n *yaml.Node) int {
	if s, ok := c.sizes[n]; ok {
		return s
	}
	s := 1
	if n.Kind != yaml.AliasNode {
		for _, k := range n.Content {
			if k != nil {
				s += c.size(k)
			}
		}
	}
	if c.sizes == nil {
		c.sizes = make(map[*yaml.Node]int)
	}
	c.sizes[n] = s
	return s
}

// entry is one key/value pair of a mapping, after merge keys.
type entry struct {
	key  *yaml.Node // the key as written, for positions
	name string
	val  *yaml.Node // unresolved
}

// entries returns the pairs of mapping m in order, with merge keys
// ("<<: *defaults", "<<: [*a, *b]") expanded where they stand. As in YAML
// 1.1, a key written in m overrides a merged one, and an earlier merge
// source overrides a later one; these are not duplicates. A key written
// twice in m is, and so is a key that is not a string: both are reported
// and left out.
func (c *checker) entries(m *yaml.Node) []entry {
	return c.mergedEntries(m, nil)
}

func (c *checker) mergedEntries(m *yaml.Node, merging []*yaml.Node) []entry {
	n := len(m.Content) / 2
	keys := make([]*yaml.Node, n) // resolved
	keep := make([]bool, n)
	written := make(map[string]*yaml.Node, n)
	for i := range n {
		k := c.resolve(m.Content[2*i])
		keys[i] = k
		if isMergeKey(k) {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			c.at(m.Content[2*i], RuleType, "mapping keys must be strings, got %s", kindName(k))
			continue
		}
		if first, dup := written[k.Value]; dup {
			c.at(m.Content[2*i], RuleSyntax, "key %q is already defined at line %d", k.Value, first.Line)
			continue
		}
		written[k.Value] = m.Content[2*i]
		keep[i] = true
	}
	out := make([]entry, 0, n)
	var merged map[string]bool
	for i := range n {
		key, val := m.Content[2*i], m.Content[2*i+1]
		if keep[i] {
			out = append(out, entry{key: key, name: keys[i].Value, val: val})
			continue
		}
		if !isMergeKey(keys[i]) {
			continue
		}
		for _, src := range c.mergeSources(val) {
			if src == m || containsNode(merging, src) {
				c.at(key, RuleAlias, "merge key includes the mapping it is in")
				continue
			}
			for _, e := range c.mergedEntries(src, append(merging, m)) {
				if written[e.name] != nil || merged[e.name] {
					continue
				}
				if merged == nil {
					merged = make(map[string]bool)
				}
				merged[e.name] = true
				out = append(out, e)
			}
		}
	}
	return out
}

// mergeSources returns the mappings a merge key's value names: one mapping,
// or a list of them.
func (c *checker) mergeSources(v *yaml.Node) []*yaml.Node {
	v = c.resolve(v)
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range v.Content {
			m := c.resolve(item)
			if m.Kind != yaml.MappingNode {
				c.at(m, RuleType, `a list after the merge key "<<" must hold only mappings, got %s`, kindName(m))
				continue
			}
			out = append(out, m)
		}
		return out
	}
	c.at(v, RuleType, `the merge key "<<" needs a mapping or a list of mappings, got %s`, kindName(v))
	return nil
}

func containsNode(ns []*yaml.Node, n *yaml.Node) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// text returns the literal text of a scalar that is not null. Numbers and
// booleans count: `true` and `1` are valid shell commands and stage names,
// and what the author wrote is what they mean.
func text(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		return "", false
	}
	return n.Value, true
}

// kindName names the type of n the way an author would call it.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.DocumentNode:
		return "document"
	case yaml.AliasNode:
		return "alias"
	case yaml.ScalarNode:
		switch tag := n.ShortTag(); tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "boolean"
		case "!!int":
			return "integer"
		case "!!float":
			return "number"
		case "!!str":
			return "string"
		case "!!timestamp":
			return "timestamp"
		case "!!binary":
			return "binary data"
		default:
			return "value tagged " + tag
		}
	}
	return "unknown value"
}
