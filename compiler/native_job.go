package compiler

import (
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler/expr"
)

// Rules of the native format's job keys beyond the first slice.
const (
	RuleMatrix   = "matrix"   // an invalid matrix, or one over the limit
	RuleTemplate = "template" // an invalid {{ … }} template
	RuleValue    = "value"    // a value outside the allowed set
)

// nativeRetryWhen are the failure classes a native retry may name.
var nativeRetryWhen = []string{"always", "failure", "infrastructure", "timeout"}

// nativeMatrix reads a job's matrix: axes of values, and include and
// exclude lists of combinations. It returns nil when the matrix is absent
// or too broken to expand (then it is reported).
func (c *checker) nativeMatrix(v *yaml.Node, own owner) *matrixDecl {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, `"matrix"%s must be a mapping of names to lists of values, got %s`, own.of(), kindName(v))
		return nil
	}
	m := &matrixDecl{}
	ok := true
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "include", "exclude":
			rows, rowsOK := c.matrixRows(e, val, own)
			ok = ok && rowsOK
			if e.name == "include" {
				m.include = rows
			} else {
				m.exclude = rows
			}
		default:
			if !validEnvName(e.name) {
				c.at(e.key, RuleMatrix, "invalid matrix name %q%s: names become environment variables, so they start with a letter or _ and hold only letters, digits and _", e.name, own.in())
				ok = false
				continue
			}
			if val.Kind != yaml.SequenceNode {
				c.at(val, RuleType, "matrix axis %q%s must be a list of values, got %s", e.name, own.of(), kindName(val))
				ok = false
				continue
			}
			if len(val.Content) == 0 {
				c.at(val, RuleMatrix, "matrix axis %q%s has no values, so the job would never run", e.name, own.of())
				ok = false
				continue
			}
			axis := matrixAxis{name: e.name}
			for _, item := range val.Content {
				axis.values = append(axis.values, c.plainValue(item))
			}
			m.axes = append(m.axes, axis)
		}
	}
	if !ok {
		return nil
	}
	axisNames := make([]string, len(m.axes))
	for i, a := range m.axes {
		axisNames[i] = a.name
	}
	for k, row := range m.exclude {
		for _, key := range row.keys {
			if !slices.Contains(axisNames, key) {
				c.at(v, RuleMatrix, "exclude entry %d%s names %q, which is not a matrix axis%s (axes: %s)", k+1, own.of(), key, didYouMean(c.suggest(key, axisNames)), list(axisNames))
				return nil
			}
		}
	}
	if len(m.axes) == 0 && len(m.include) == 0 {
		c.at(v, RuleMatrix, "the matrix%s has neither axes nor include entries", own.of())
		return nil
	}
	return m
}

func (c *checker) matrixRows(e entry, v *yaml.Node, own owner) ([]variant, bool) {
	if isNull(v) {
		return nil, true
	}
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, "matrix %s%s must be a list of mappings, got %s", e.name, own.of(), kindName(v))
		return nil, false
	}
	var rows []variant
	for _, item := range v.Content {
		m := c.resolve(item)
		if m.Kind != yaml.MappingNode {
			c.at(item, RuleType, "entries of matrix %s%s must be mappings of names to values, got %s", e.name, own.of(), kindName(m))
			return nil, false
		}
		row := variant{values: map[string]any{}}
		for _, kv := range c.entries(m) {
			if !validEnvName(kv.name) {
				c.at(kv.key, RuleMatrix, "invalid matrix name %q%s: names start with a letter or _ and hold only letters, digits and _", kv.name, own.in())
				return nil, false
			}
			row.keys = append(row.keys, kv.name)
			row.values[kv.name] = c.plainValue(kv.val)
		}
		rows = append(rows, row)
	}
	return rows, true
}

// plainValue converts a YAML value to the JSON-like form of matrix values.
func (c *checker) plainValue(n *yaml.Node) any { return c.yamlValue(n, c.entries, nil) }

// yamlValue converts a YAML value to the JSON-like form of matrix values
// and expressions: nil, bool, float64, string, []any and map[string]any.
// entries reads a mapping's pairs (formats differ on merge keys and
// duplicates); mapped, when set, sees every object with its keys in
// written order.
func (c *checker) yamlValue(n *yaml.Node, entries func(*yaml.Node) []entry, mapped func(map[string]any, []string)) any {
	n = c.resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		es := entries(n)
		m := make(map[string]any, len(es))
		keys := make([]string, 0, len(es))
		for _, e := range es {
			m[e.name] = c.yamlValue(e.val, entries, mapped)
			keys = append(keys, e.name)
		}
		if mapped != nil {
			mapped(m, keys)
		}
		return m
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			out[i] = c.yamlValue(item, entries, mapped)
		}
		return out
	}
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		return strings.EqualFold(n.Value, "true")
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			return f
		}
	}
	return n.Value
}

// expandNative multiplies job j by its matrix m: one jobDecl per variant,
// whose ID and name carry the variant's values and whose env holds them.
func (c *checker) expandNative(j *jobDecl, m *matrixDecl, vals []*yaml.Node) []*jobDecl {
	if size := m.maxSize(); size > c.opts.maxMatrixJobs() {
		c.at(j.key, RuleMatrix, "the matrix of job %q expands to up to %d jobs, more than the limit of %d", j.spec.ID, size, c.opts.maxMatrixJobs())
		return []*jobDecl{j}
	}
	variants := m.expand()
	if len(variants) == 0 {
		c.at(j.key, RuleMatrix, "the matrix of job %q excludes every combination, so the job would never run", j.spec.ID)
		return []*jobDecl{j}
	}
	out := make([]*jobDecl, 0, len(variants))
	for _, v := range variants {
		values := v.strings()
		// Variants share what no template changes (steps, services
		// without templates …): a plan is read-only, and stores copy
		// what they keep. applyTemplates copies before it rewrites.
		spec := *j.spec
		spec.ID = v.name(j.spec.ID)
		spec.MatrixOf = j.spec.ID
		spec.Matrix = values
		spec.MatrixJSON = matrixJSON(v.values)
		// Each variant is gated on its own, so that a platform adding
		// to one's gate leaves the others'.
		spec.Gate = j.spec.Gate.Merge(nil)
		if spec.Name == j.spec.ID {
			spec.Name = spec.ID
		}
		c.chargePlan(len(values), j.key)
		spec.Env = make(map[string]string, len(j.spec.Env)+len(values))
		maps.Copy(spec.Env, j.spec.Env)
		maps.Copy(spec.Env, values)
		vj := *j
		vj.spec = &spec
		vj.group = j.spec.ID
		c.applyTemplates(&vj, values, vals)
		out = append(out, &vj)
	}
	return out
}

// applyTemplates expands {{ matrix.NAME }} in the fields that may hold it.
// vals are the nodes the fields were read from, for positions; a job
// without matrix passes nil values and only gets its templates checked.
func (c *checker) applyTemplates(j *jobDecl, values map[string]string, vals []*yaml.Node) {
	at := func(i int) *yaml.Node {
		if i < len(vals) && vals[i] != nil {
			return vals[i]
		}
		return j.key
	}
	s := j.spec
	s.Name = c.template(at(tplName), s.Name, values, false)
	s.Image = c.template(at(tplImage), s.Image, values, false)
	if hasTemplate(s.RunsOn, func(l string) string { return l }) {
		s.RunsOn = slices.Clone(s.RunsOn)
		for i := range s.RunsOn {
			s.RunsOn[i] = c.template(at(tplRunsOn), s.RunsOn[i], values, false)
		}
	}
	if hasTemplate(s.Services, func(sv cikit.Service) string { return sv.Image }) {
		s.Services = slices.Clone(s.Services)
		for i := range s.Services {
			s.Services[i].Image = c.template(at(tplServices), s.Services[i].Image, values, false)
		}
	}
	if s.Concurrency != nil && strings.Contains(s.Concurrency.Group, "{{") {
		conc := *s.Concurrency
		conc.Group = c.template(at(tplConcurrency), conc.Group, values, false)
		s.Concurrency = &conc
	}
	if s.Environment != nil && strings.Contains(s.Environment.Name, "{{") {
		env := *s.Environment
		env.Name = c.template(at(tplEnvironment), env.Name, values, false)
		s.Environment = &env
	}
	if hasTemplate(s.Caches, func(k cikit.Cache) string {
		return k.Key + strings.Join(k.FallbackKeys, "") + strings.Join(k.RestoreKeys, "")
	}) {
		s.Caches = slices.Clone(s.Caches)
		for i := range s.Caches {
			k := &s.Caches[i]
			k.Key = c.cacheKeyTemplate(at(tplCache), k.Key, values)
			k.FallbackKeys = slices.Clone(k.FallbackKeys)
			for f := range k.FallbackKeys {
				k.FallbackKeys[f] = c.cacheKeyTemplate(at(tplCache), k.FallbackKeys[f], values)
			}
			k.RestoreKeys = slices.Clone(k.RestoreKeys)
			for r := range k.RestoreKeys {
				k.RestoreKeys[r] = c.cacheKeyTemplate(at(tplCache), k.RestoreKeys[r], values)
			}
		}
	}
}

// cacheKeyTemplate expands the matrix templates of cache key s and
// keeps its hash templates, which the runner renders with
// expr.RenderCacheKey. A matrix value that itself holds "{{" would leave
// the runner a key it cannot render: that is reported here.
func (c *checker) cacheKeyTemplate(n *yaml.Node, s string, values map[string]string) string {
	before := len(c.diags)
	out := c.template(n, s, values, true)
	if len(c.diags) > before || !strings.Contains(out, "{{") {
		return out
	}
	if _, err := expr.RenderCacheKey(out, func([]string) (string, error) { return "", nil }); err != nil {
		c.at(n, RuleTemplate, "cache key %q expands to %q, which the runner cannot render: %v", s, out, err)
	}
	return out
}

// hasTemplate reports whether any element's text holds "{{".
func hasTemplate[T any](items []T, text func(T) string) bool {
	for _, it := range items {
		if strings.Contains(text(it), "{{") {
			return true
		}
	}
	return false
}

// Indexes of the template-bearing fields in the vals of applyTemplates.
const (
	tplName = iota
	tplImage
	tplRunsOn
	tplServices
	tplConcurrency
	tplEnvironment
	tplCache
	tplCount
)

// template expands the {{ … }} placeholders of s. matrix.NAME takes the
// variant's value; with hash allowed (cache keys), hash("glob", …) stays
// for the runner, which hashes the files when it restores the cache. A
// nil values map means the job has no matrix, so matrix references are
// errors.
func (c *checker) template(n *yaml.Node, s string, values map[string]string, hash bool) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	var out strings.Builder
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			out.WriteString(rest)
			return out.String()
		}
		out.WriteString(rest[:i])
		end := strings.Index(rest[i:], "}}")
		if end < 0 {
			c.at(n, RuleTemplate, "unterminated {{ in %q: close it with }}", s)
			return s
		}
		call := strings.TrimSpace(rest[i+2 : i+end])
		rest = rest[i+end+2:]
		switch {
		case strings.HasPrefix(call, "matrix."):
			name := strings.TrimPrefix(call, "matrix.")
			v, ok := values[name]
			if !ok {
				keys := slices.Sorted(maps.Keys(values))
				if values == nil {
					c.at(n, RuleTemplate, "{{ %s }} refers to the matrix, but the job has none", call)
				} else {
					c.at(n, RuleTemplate, "{{ %s }}: the matrix has no %q%s (names: %s)", call, name, didYouMean(c.suggest(name, keys)), list(keys))
				}
				continue
			}
			out.WriteString(v)
		case hash && strings.HasPrefix(call, "hash("):
			if _, err := expr.ParseHashCall(call); err != nil {
				c.at(n, RuleTemplate, "{{ %s }}: %v", call, err)
				continue
			}
			out.WriteString("{{ " + call + " }}")
		default:
			allowed := "matrix.NAME"
			if hash {
				allowed += ` or hash("path/glob", …)`
			}
			c.at(n, RuleTemplate, "unknown template {{ %s }}: use %s", call, allowed)
		}
	}
}

// stringList reads a string or a list of strings.
func (c *checker) stringList(v *yaml.Node, key string, own owner) []string {
	if isNull(v) {
		return nil
	}
	if s, ok := text(v); ok {
		return []string{s}
	}
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, "%q%s must be a string or a list of strings, got %s", key, own.of(), kindName(v))
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		iv := c.resolve(item)
		s, ok := text(iv)
		if !ok {
			c.at(item, RuleType, "entries of %q%s must be strings, got %s", key, own.of(), kindName(iv))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (c *checker) boolean(v *yaml.Node, key string, own owner) bool {
	if isNull(v) {
		return false
	}
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
		return strings.EqualFold(v.Value, "true")
	}
	c.at(v, RuleType, "%q%s must be true or false, got %s", key, own.of(), kindName(v))
	return false
}

// oneOf checks that s is one of the valid values of key.
func (c *checker) oneOf(n *yaml.Node, s, key string, valid []string, own owner) bool {
	if slices.Contains(valid, s) {
		return true
	}
	c.at(n, RuleValue, "invalid %s %q%s%s (valid: %s)", key, s, own.of(), didYouMean(c.suggest(s, valid)), list(valid))
	return false
}

func (c *checker) nativeConcurrency(v *yaml.Node, own owner) *cikit.Concurrency {
	if isNull(v) {
		return nil
	}
	if s, ok := text(v); ok {
		return &cikit.Concurrency{Group: s}
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, `"concurrency"%s must be a group name or a mapping with "group", got %s`, own.of(), kindName(v))
		return nil
	}
	conc := &cikit.Concurrency{}
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "group":
			conc.Group, _ = c.scalar(val, "group", own)
		case "cancel_in_progress":
			conc.CancelInProgress = c.boolean(val, e.name, own)
		default:
			c.unknownKey(e, own, []string{"cancel_in_progress", "group"})
		}
	}
	if conc.Group == "" {
		c.at(v, RuleValue, `"concurrency"%s needs a non-empty "group"`, own.of())
		return nil
	}
	return conc
}

func (c *checker) nativeServices(v *yaml.Node, own owner) []cikit.Service {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, `"services"%s must be a list of images or service mappings, got %s`, own.of(), kindName(v))
		return nil
	}
	var out []cikit.Service
	for _, item := range v.Content {
		iv := c.resolve(item)
		if img, ok := text(iv); ok {
			out = append(out, cikit.Service{Name: cikit.Service{Image: img}.HostName(), Image: img})
			continue
		}
		if iv.Kind != yaml.MappingNode {
			c.at(item, RuleType, "a service%s must be an image or a mapping with \"image\", got %s", own.of(), kindName(iv))
			continue
		}
		var s cikit.Service
		for _, e := range c.entries(iv) {
			val := c.resolve(e.val)
			switch e.name {
			case "name":
				s.Name, _ = c.scalar(val, "name", own)
			case "image":
				s.Image, _ = c.scalar(val, "image", own)
			case "env":
				s.Env = c.env(val, own)
			case "ports":
				s.Ports = c.stringList(val, "ports", own)
			case "command":
				s.Command = c.stringList(val, "command", own)
			default:
				c.unknownKey(e, own, []string{"command", "env", "image", "name", "ports"})
			}
		}
		if s.Image == "" {
			c.at(item, RuleValue, `a service%s needs an "image"`, own.of())
			continue
		}
		if s.Name == "" {
			s.Name = s.HostName()
		}
		out = append(out, s)
	}
	return out
}

func (c *checker) nativeRetry(v *yaml.Node, own owner) *cikit.Retry {
	if isNull(v) {
		return nil
	}
	const maxRetries = 10
	checkMax := func(n *yaml.Node) (int, bool) {
		var max int
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&max) != nil {
			c.at(n, RuleType, `"retry"%s must be a number of retries or a mapping with "max", got %s`, own.of(), kindName(n))
			return 0, false
		}
		if max < 0 || max > maxRetries {
			c.at(n, RuleValue, "retries%s must be between 0 and %d, got %d", own.of(), maxRetries, max)
			return 0, false
		}
		return max, true
	}
	if v.Kind == yaml.ScalarNode {
		if max, ok := checkMax(v); ok && max > 0 {
			return &cikit.Retry{Max: max}
		}
		return nil
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, `"retry"%s must be a number of retries or a mapping with "max", got %s`, own.of(), kindName(v))
		return nil
	}
	r := &cikit.Retry{}
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "max":
			r.Max, _ = checkMax(val)
		case "when":
			for _, w := range c.stringList(val, "when", own) {
				if c.oneOf(val, w, "retry class", nativeRetryWhen, own) {
					r.When = append(r.When, w)
				}
			}
		default:
			c.unknownKey(e, own, []string{"max", "when"})
		}
	}
	if r.Max == 0 {
		return nil
	}
	return r
}

// nativeCacheKeys are the keys of a cache of the native format.
var nativeCacheKeys = []string{"fallback_keys", "key", "path", "paths", "policy", "restore_keys", "when"}

// nativeCaches reads the caches of a job: a mapping or a list of them.
// The key, fallback_keys and restore_keys may hold {{ matrix.NAME }},
// expanded per variant, and {{ hash("glob", …) }}, which the runner
// renders from the content of the files when the job runs.
func (c *checker) nativeCaches(v *yaml.Node, own owner) []cikit.Cache {
	if isNull(v) {
		return nil
	}
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	var out []cikit.Cache
	for _, item := range items {
		m := c.resolve(item)
		if m.Kind != yaml.MappingNode {
			c.at(item, RuleType, `"cache"%s must be a mapping with "key" and "paths", or a list of them, got %s`, own.of(), kindName(m))
			continue
		}
		var k cikit.Cache
		for _, e := range c.entries(m) {
			val := c.resolve(e.val)
			switch e.name {
			case "key":
				k.Key, _ = c.scalar(val, "key", own)
			case "paths", "path":
				k.Paths = append(k.Paths, c.stringList(val, e.name, own)...)
			case "fallback_keys":
				k.FallbackKeys = c.stringList(val, e.name, own)
			case "restore_keys":
				k.RestoreKeys = c.stringList(val, e.name, own)
			case "policy":
				if p, ok := c.scalar(val, e.name, own); ok && c.oneOf(val, p, "cache policy", []string{"pull", "pull-push", "push"}, own) {
					k.Policy = p
				}
			case "when":
				if w, ok := c.scalar(val, e.name, own); ok && c.oneOf(val, w, "cache when", []string{"always", "on_failure", "on_success"}, own) {
					k.When = w
				}
			default:
				c.unknownKey(e, own, nativeCacheKeys)
			}
		}
		if k.Key == "" || len(k.Paths) == 0 {
			c.at(item, RuleValue, `a cache%s needs a "key" and "paths"`, own.of())
			continue
		}
		out = append(out, k)
	}
	return out
}

func (c *checker) nativeArtifacts(v *yaml.Node, own owner) *cikit.Artifacts {
	if isNull(v) {
		return nil
	}
	a := &cikit.Artifacts{}
	if v.Kind != yaml.MappingNode {
		a.Paths = c.stringList(v, "artifacts", own)
		if len(a.Paths) == 0 {
			return nil
		}
		return a
	}
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "paths":
			a.Paths = c.stringList(val, e.name, own)
		case "exclude":
			a.Exclude = c.stringList(val, e.name, own)
		case "name":
			a.Name, _ = c.scalar(val, e.name, own)
		case "when":
			if w, ok := c.scalar(val, e.name, own); ok && c.oneOf(val, w, "artifacts when", []string{"always", "on_failure", "on_success"}, own) {
				a.When = w
			}
		case "expire_in":
			if s, ok := text(val); ok && s == "never" {
				a.ExpireNever = true
				continue
			}
			a.ExpireIn = c.expireIn(val, own)
		default:
			c.unknownKey(e, own, []string{"exclude", "expire_in", "name", "paths", "when"})
		}
	}
	if len(a.Paths) == 0 {
		c.at(v, RuleValue, `"artifacts"%s needs "paths"`, own.of())
		return nil
	}
	return a
}

// expireIn reads a retention period: a Go duration ("72h") or a number of
// days ("7d", "30d"); "never" is read by nativeArtifacts.
func (c *checker) expireIn(v *yaml.Node, own owner) time.Duration {
	s, ok := c.scalar(v, "expire_in", own)
	if !ok {
		return 0
	}
	if days, found := strings.CutSuffix(s, "d"); found {
		if n, err := strconv.Atoi(days); err == nil && n > 0 {
			return time.Duration(n) * 24 * time.Hour
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	c.at(v, RuleValue, `invalid expire_in %q%s: use a number of days ("7d"), a duration ("72h") or "never"`, s, own.of())
	return 0
}

func (c *checker) nativeEnvironment(v *yaml.Node, own owner) *cikit.Environment {
	if isNull(v) {
		return nil
	}
	if s, ok := text(v); ok {
		return &cikit.Environment{Name: s}
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, `"environment"%s must be a name or a mapping with "name" and "url", got %s`, own.of(), kindName(v))
		return nil
	}
	env := &cikit.Environment{}
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "name":
			env.Name, _ = c.scalar(val, e.name, own)
		case "url":
			env.URL, _ = c.scalar(val, e.name, own)
		default:
			c.unknownKey(e, own, []string{"name", "url"})
		}
	}
	if env.Name == "" {
		c.at(v, RuleValue, `"environment"%s needs a "name"`, own.of())
		return nil
	}
	return env
}

// nativeSecrets reads the names of the secrets a job may read.
func (c *checker) nativeSecrets(v *yaml.Node, own owner) []string {
	names := c.stringList(v, "secrets", own)
	for _, n := range names {
		if !validEnvName(n) {
			c.at(v, RuleValue, "invalid secret name %q%s: secrets are exposed as environment variables, so names start with a letter or _ and hold only letters, digits and _", n, own.of())
			return nil
		}
	}
	return names
}

// nativeCheckouts are the strategies of a native checkout.
var nativeCheckouts = []string{"clone", "fetch", "none"}

// nativeCheckout reads a job's checkout: false for none, or a mapping of
// strategy, depth (0 for the whole history), submodules (true, false or
// "recursive") and path. The default, when the key is absent or null, is
// a shallow fetch of the run's commit into the workspace's root.
func (c *checker) nativeCheckout(v *yaml.Node, own owner) *cikit.Checkout {
	co := &cikit.Checkout{Strategy: "fetch"}
	switch {
	case isNull(v):
		return co
	case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool":
		if !strings.EqualFold(v.Value, "true") {
			co.Strategy = "none"
		}
		return co
	case v.Kind != yaml.MappingNode:
		c.at(v, RuleType, `"checkout"%s must be true, false or a mapping of strategy, depth, submodules and path, got %s`, own.of(), describe(v))
		return co
	}
	for _, e := range c.entries(v) {
		val := c.resolve(e.val)
		switch e.name {
		case "strategy":
			if s, ok := c.scalar(val, "strategy", own); ok && c.oneOf(val, s, "checkout strategy", nativeCheckouts, own) {
				co.Strategy = s
			}
		case "depth":
			n, err := strconv.Atoi(val.Value)
			switch {
			case isNull(val):
			case val.Kind != yaml.ScalarNode || val.ShortTag() != "!!int" || err != nil || n < 0:
				c.at(val, RuleValue, `"depth" of the checkout%s must be a number of commits, 0 for the whole history, got %s`, own.of(), describe(val))
			case n == 0:
				co.Depth = -1
			default:
				co.Depth = n
			}
		case "submodules":
			switch {
			case isNull(val):
			case val.Kind == yaml.ScalarNode && val.ShortTag() == "!!bool":
				if strings.EqualFold(val.Value, "true") {
					co.Submodules = "normal"
				}
			case val.Kind == yaml.ScalarNode && val.Value == "recursive":
				co.Submodules = "recursive"
			default:
				c.at(val, RuleValue, `"submodules" of the checkout%s must be true, false or "recursive", got %s`, own.of(), describe(val))
			}
		case "path":
			p, ok := c.scalar(val, "path", own)
			if !ok || p == "" {
				continue
			}
			switch clean := path.Clean(p); {
			case !fs.ValidPath(clean):
				c.at(val, RuleValue, `"path" of the checkout%s must be a relative path inside the workspace, got %q`, own.of(), p)
			case clean != ".":
				co.Path = clean
			}
		default:
			c.unknownKey(e, own, []string{"depth", "path", "strategy", "submodules"})
		}
	}
	return co
}

// describe names a value for a message: a scalar by its text, anything
// else by its kind.
func describe(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode {
		return strconv.Quote(v.Value)
	}
	return kindName(v)
}
