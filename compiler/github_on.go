package compiler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // schedule time zones are checked the same on every machine

	"go.yaml.in/yaml/v3"
)

// ghEvents are the events that trigger workflows, with their activity
// types: nil for an event that has none, and ghAnyTypes for one whose
// types are the sender's (repository_dispatch).
var ghEvents = map[string][]string{
	"branch_protection_rule":      {"created", "edited", "deleted"},
	"check_run":                   {"created", "rerequested", "completed", "requested_action"},
	"check_suite":                 {"completed"},
	"create":                      nil,
	"delete":                      nil,
	"deployment":                  nil,
	"deployment_status":           nil,
	"discussion":                  {"created", "edited", "deleted", "transferred", "pinned", "unpinned", "labeled", "unlabeled", "locked", "unlocked", "category_changed", "answered", "unanswered"},
	"discussion_comment":          {"created", "edited", "deleted"},
	"fork":                        nil,
	"gollum":                      nil,
	"image_version":               nil,
	"issue_comment":               {"created", "edited", "deleted"},
	"issues":                      {"opened", "edited", "deleted", "transferred", "pinned", "unpinned", "closed", "reopened", "assigned", "unassigned", "labeled", "unlabeled", "locked", "unlocked", "milestoned", "demilestoned", "typed", "untyped"},
	"label":                       {"created", "edited", "deleted"},
	"merge_group":                 {"checks_requested"},
	"milestone":                   {"created", "closed", "opened", "edited", "deleted"},
	"page_build":                  nil,
	"public":                      nil,
	"pull_request":                ghPullRequestTypes,
	"pull_request_review":         {"submitted", "edited", "dismissed"},
	"pull_request_review_comment": {"created", "edited", "deleted"},
	"pull_request_target":         ghPullRequestTypes,
	"push":                        nil,
	"registry_package":            {"published", "updated"},
	"release":                     {"published", "unpublished", "created", "edited", "deleted", "prereleased", "released"},
	"repository_dispatch":         ghAnyTypes,
	"schedule":                    nil,
	"status":                      nil,
	"watch":                       {"started"},
	"workflow_call":               nil,
	"workflow_dispatch":           nil,
	"workflow_run":                {"completed", "requested", "in_progress"},
}

var (
	ghPullRequestTypes = []string{"assigned", "unassigned", "labeled", "unlabeled", "opened", "edited", "closed", "reopened", "synchronize", "converted_to_draft", "locked", "unlocked", "enqueued", "dequeued", "milestoned", "demilestoned", "ready_for_review", "review_requested", "review_request_removed", "auto_merge_enabled", "auto_merge_disabled"}
	ghAnyTypes         = []string{}
	// ghDefaultTypes are the types that trigger when none are written,
	// for the events where that is not all of them.
	ghDefaultTypes = map[string][]string{
		"pull_request":        {"opened", "synchronize", "reopened"},
		"pull_request_target": {"opened", "synchronize", "reopened"},
	}
	ghEventNames = sortedKeys(ghEvents)
)

// ghFilterEvents says which events each filter applies to.
var ghFilterEvents = map[string][]string{
	"branches":  {"merge_group", "pull_request", "pull_request_target", "push", "workflow_run"},
	"tags":      {"push"},
	"paths":     {"pull_request", "pull_request_target", "push"},
	"workflows": {"workflow_run"},
}

var ghWebhookKeys = []string{"branches", "branches-ignore", "paths", "paths-ignore", "tags", "tags-ignore", "types", "workflows"}

// ghTriggerEvent maps GitHub's event names to Trigger.Event's neutral ones.
func ghTriggerEvent(name string) string {
	if name == "workflow_dispatch" {
		return "manual"
	}
	return name
}

// on reads the on: key: one event, a list of events, or a mapping of
// events to their configuration.
func (g *ghCompiler) on(wf *ghWorkflow, e entry) {
	c := g.c
	v := c.resolve(e.val)
	seen := map[string]*yaml.Node{}
	event := func(nameNode, config *yaml.Node) {
		name := c.resolve(nameNode).Value
		if first, dup := seen[name]; dup {
			c.at(nameNode, RuleEvent, "event %q is already listed at line %d", name, first.Line)
			return
		}
		seen[name] = nameNode
		g.event(wf, nameNode, name, config)
	}
	switch {
	case isNull(v) || v.Kind == yaml.ScalarNode && strings.TrimSpace(v.Value) == "":
		c.at(v, RuleEvent, `"on" is empty: name the events that trigger the workflow, such as "push"`)
	case v.Kind == yaml.ScalarNode:
		event(v, nil)
	case v.Kind == yaml.SequenceNode:
		if len(v.Content) == 0 {
			c.at(v, RuleEvent, `"on" is an empty list: name the events that trigger the workflow, such as "push"`)
		}
		for _, item := range v.Content {
			iv := c.resolve(item)
			if iv.Kind != yaml.ScalarNode || isNull(iv) {
				c.at(item, RuleType, `entries of "on" must be event names, got %s`, kindName(iv))
				continue
			}
			event(iv, nil)
		}
	case v.Kind == yaml.MappingNode:
		entries := c.ghEntries(v, false)
		if len(entries) == 0 {
			c.at(v, RuleEvent, `"on" is empty: name the events that trigger the workflow, such as "push"`)
		}
		for _, ev := range entries {
			event(ev.key, ev.val)
		}
	default:
		c.at(v, RuleType, `"on" must be an event name, a list of them, or a mapping of events to their filters, got %s`, kindName(v))
	}
}

// event reads one event; config is its configuration node, nil when the
// event is only named.
func (g *ghCompiler) event(wf *ghWorkflow, nameNode *yaml.Node, name string, config *yaml.Node) {
	c := g.c
	types, known := ghEvents[name]
	if !known {
		hint := c.suggest(name, ghEventNames)
		if lower := strings.ToLower(name); hint == "" && ghEvents[lower] != nil {
			hint = lower
		}
		if hint != "" {
			c.at(nameNode, RuleEvent, "unknown event %q%s", name, didYouMean(hint))
		} else {
			c.at(nameNode, RuleEvent, "unknown event %q (events: %s)", name, list(ghEventNames))
		}
		return
	}
	t := Trigger{Event: ghTriggerEvent(name)}
	if config != nil {
		config = c.resolve(config)
	}
	if config == nil || isNull(config) {
		switch name {
		case "schedule":
			c.at(nameNode, RuleSchedule, `"schedule" needs a list of cron schedules, such as "- cron: '0 3 * * *'"`)
			return
		case "workflow_call":
			wf.call = &ghCallSpec{node: nameNode}
		case "workflow_dispatch":
			wf.hasDispatch = true
		}
		t.Types = slices.Clone(ghDefaultTypes[name])
		wf.triggers = append(wf.triggers, t)
		return
	}
	switch name {
	case "schedule":
		if t.Schedules = g.schedules(config); len(t.Schedules) > 0 && !wf.called {
			wf.runWarnings = append(wf.runWarnings, c.notHonoured(nameNode, scheduleNotRun))
		}
	case "workflow_dispatch":
		wf.hasDispatch = true
		t.Inputs = g.dispatchInputs(config)
		wf.dispatch = t.Inputs
	case "workflow_call":
		wf.call = g.callSpec(nameNode, config)
		for _, in := range wf.call.inputs {
			t.Inputs = append(t.Inputs, in.Input)
		}
	case "repository_dispatch":
		entries, _ := c.ghMapping(config, `"repository_dispatch"`, false)
		for _, e := range entries {
			if e.name != "types" {
				c.ghUnknownKey(e, `"repository_dispatch"`, []string{"types"})
				continue
			}
			t.Types, _ = c.ghStrings(e.val, `"types"`, false)
		}
	case "image_version":
		entries, _ := c.ghMapping(config, `"image_version"`, false)
		for _, e := range entries {
			switch e.name {
			case "names":
				c.ghStrings(e.val, `"names"`, false)
			case "versions":
				_, nodes := c.ghStrings(e.val, `"versions"`, false)
				for _, n := range nodes {
					c.ghCheckGlob(n, true)
				}
			default:
				c.ghUnknownKey(e, `"image_version"`, []string{"names", "versions"})
			}
		}
	default:
		g.webhook(&t, nameNode, name, types, config)
	}
	if t.Types == nil {
		t.Types = slices.Clone(ghDefaultTypes[name])
	}
	wf.triggers = append(wf.triggers, t)
}

// webhook reads the configuration of a webhook event: activity types and
// filters.
func (g *ghCompiler) webhook(t *Trigger, nameNode *yaml.Node, name string, types []string, config *yaml.Node) {
	c := g.c
	entries, ok := c.ghMapping(config, fmt.Sprintf("the configuration of event %q", name), false)
	if !ok {
		return
	}
	keys := map[string]*yaml.Node{}
	for _, e := range entries {
		switch e.name {
		case "types":
			vals, nodes := c.ghStrings(e.val, `"types"`, false)
			switch {
			case types == nil:
				c.at(e.key, RuleEvent, "event %q has no activity types, so it takes no \"types\"", name)
				continue
			case len(types) > 0:
				for i, ty := range vals {
					if !slices.Contains(types, ty) {
						c.at(nodes[i], RuleEvent, "unknown activity type %q of event %q%s (types: %s)", ty, name, didYouMean(c.suggest(ty, types)), strings.Join(types, ", "))
					}
				}
			}
			if t.Types = vals; t.Types == nil {
				t.Types = []string{}
			}
		case "branches", "branches-ignore", "tags", "tags-ignore", "paths", "paths-ignore", "workflows":
			base := strings.TrimSuffix(e.name, "-ignore")
			if !slices.Contains(ghFilterEvents[base], name) {
				c.at(e.key, RuleEvent, "event %q takes no %q filter: it is only for %s", name, e.name, strings.Join(ghFilterEvents[base], ", "))
				continue
			}
			keys[e.name] = e.key
			vals, nodes := c.ghStrings(e.val, fmt.Sprintf("%q", e.name), true)
			if vals == nil {
				vals = []string{}
			}
			if base != "workflows" {
				for _, n := range nodes {
					c.ghCheckGlob(n, base != "paths")
				}
				c.ghCheckNegations(e, vals)
			}
			switch e.name {
			case "branches":
				t.Branches = vals
			case "branches-ignore":
				t.BranchesIgnore = vals
			case "tags":
				t.Tags = vals
			case "tags-ignore":
				t.TagsIgnore = vals
			case "paths":
				t.Paths = vals
			case "paths-ignore":
				t.PathsIgnore = vals
			case "workflows":
				t.Workflows = vals
			}
		default:
			c.ghUnknownKey(e, fmt.Sprintf("event %q", name), ghWebhookKeys)
		}
	}
	for _, base := range []string{"branches", "tags", "paths"} {
		inc, ign := keys[base], keys[base+"-ignore"]
		if inc == nil || ign == nil {
			continue
		}
		later := ign
		if inc.Line > ign.Line || inc.Line == ign.Line && inc.Column > ign.Column {
			later = inc
		}
		c.at(later, RuleEvent, `event %q cannot have both %q and "%s-ignore": use one, with "!" in front of the patterns to exclude`, name, base, base)
	}
	if name == "workflow_run" && keys["workflows"] == nil {
		c.at(nameNode, RuleEvent, `event "workflow_run" needs "workflows": the names of the workflows whose runs trigger this one`)
	}
}

// ghCheckNegations reports a filter whose patterns are all negated: it
// matches nothing, since negations only exclude what earlier patterns
// included.
func (c *checker) ghCheckNegations(e entry, vals []string) {
	if len(vals) == 0 {
		return
	}
	for _, v := range vals {
		if !strings.HasPrefix(v, "!") {
			return
		}
	}
	c.at(e.key, RuleFilter, "every pattern of %q starts with '!', so it matches nothing: a negated pattern only excludes what an earlier pattern included (put '**' first)", e.name)
}

// ghCheckGlob checks one filter pattern, written at n, and reports what
// GitHub would refuse, at the character where it is. isRef is true for
// branches and tags, whose names git restricts.
func (c *checker) ghCheckGlob(n *yaml.Node, isRef bool) {
	n = c.resolve(n)
	p := n.Value
	report := func(offset int, format string, args ...any) {
		line, col := c.scalarPos(n, offset)
		c.report(line, col, RuleFilter, "invalid filter pattern %q: %s", p, fmt.Sprintf(format, args...))
	}
	if p == "" || p == "!" {
		report(0, "a pattern must not be empty")
		return
	}
	body, start := p, 0
	if strings.HasPrefix(p, "!") {
		body, start = p[1:], 1
	}
	if !isRef {
		switch {
		case strings.TrimSpace(p) != p:
			report(0, "a path pattern has no leading or trailing spaces")
			return
		case body == "." || body == ".." || strings.HasPrefix(body, "./") || strings.HasPrefix(body, "../"):
			report(start, "paths are relative to the repository root, without '.' or '..' (write %q)", strings.TrimLeft(strings.TrimPrefix(body, "."), "./"))
			return
		}
	} else if strings.HasPrefix(body, "/") {
		report(start, "a branch or tag name does not start with '/'")
		return
	}
	prevQuantifiable := false
	for i := start; i < len(p); i++ {
		ch := p[i]
		quantifiable := true
		switch ch {
		case '\\':
			if i+1 < len(p) {
				i++
			}
		case '*':
			quantifiable = false
		case '?', '+':
			if !prevQuantifiable {
				report(i, "'%c' repeats the character before it, and there is none that can repeat", ch)
				return
			}
			quantifiable = false
		case '[':
			end := strings.IndexByte(p[i+1:], ']')
			if end < 0 {
				report(i, "the '[' is not closed with ']'")
				return
			}
			class := p[i+1 : i+1+end]
			if class == "" {
				report(i, "'[]' matches nothing; list characters or ranges inside")
				return
			}
			for k := 0; k+2 < len(class); k++ {
				if class[k+1] == '-' && class[k] > class[k+2] {
					report(i+1+k, "the range %q runs backwards", class[k:k+3])
					return
				}
			}
			i += end + 1
		case ' ', '\t', '~', '^', ':':
			if isRef {
				report(i, "git does not allow %q in branch and tag names", string(ch))
				return
			}
		case '\n', '\r':
			report(i, "a pattern is one line")
			return
		}
		prevQuantifiable = quantifiable
	}
	if isRef && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, ".")) {
		report(len(p)-1, "git does not allow a branch or tag name to end with %q", p[len(p)-1:])
	}
}

// schedules reads the list of cron schedules.
func (g *ghCompiler) schedules(v *yaml.Node) []Schedule {
	c := g.c
	if v.Kind != yaml.SequenceNode {
		c.at(v, RuleType, `"schedule" must be a list of cron schedules ("- cron: '0 3 * * *'"), got %s`, kindName(v))
		return nil
	}
	if len(v.Content) == 0 {
		c.at(v, RuleSchedule, `"schedule" is an empty list, so it never triggers`)
	}
	var out []Schedule
	for _, item := range v.Content {
		entries, ok := c.ghMapping(item, "a schedule", false)
		if !ok {
			continue
		}
		var s Schedule
		var cronNode *yaml.Node
		for _, e := range entries {
			switch e.name {
			case "cron":
				cronNode = c.resolve(e.val)
				s.Cron, _ = c.ghNonEmpty(e.val, `"cron"`)
			case "timezone":
				tz, ok := c.ghNonEmpty(e.val, `"timezone"`)
				if !ok {
					continue
				}
				if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
					c.at(c.resolve(e.val), RuleSchedule, "unknown time zone %q: use an IANA name such as \"Europe/Paris\" or \"America/New_York\"", tz)
					continue
				}
				s.Timezone = tz
			default:
				c.ghUnknownKey(e, "a schedule", []string{"cron", "timezone"})
			}
		}
		if cronNode == nil {
			c.at(c.resolve(item), RuleSchedule, `a schedule needs "cron"`)
			continue
		}
		if s.Cron == "" {
			continue
		}
		if msg := checkCron(s.Cron); msg != "" {
			c.at(cronNode, RuleSchedule, "invalid cron schedule %q: %s", s.Cron, msg)
			continue
		}
		out = append(out, s)
	}
	return out
}

// cronField describes one of the five fields of a cron schedule.
type cronField struct {
	name     string
	min, max int
	names    []string // names for min, min+1 …
}

var cronFields = [5]cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
	{name: "day of week", min: 0, max: 6, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}},
}

// checkCron checks a five-field POSIX cron schedule and returns what is
// wrong with it, or "". GitHub runs schedules at most every five minutes,
// so a schedule that asks for more is wrong too.
func checkCron(spec string) string {
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return fmt.Sprintf("a schedule has 5 fields (minute, hour, day of month, month, day of week), this one has %d", len(fields))
	}
	var minutes []bool
	for i, f := range fields {
		set, msg := parseCronField(f, cronFields[i])
		if msg != "" {
			return fmt.Sprintf("%s field %q: %s", cronFields[i].name, f, msg)
		}
		if i == 0 {
			minutes = set
		}
	}
	// The shortest gap between two runs is between two minutes of one
	// hour, or from the last minute of an hour to the first of the next.
	var ms []int
	for m, ok := range minutes {
		if ok {
			ms = append(ms, m)
		}
	}
	gap := 60
	for k := 1; k < len(ms); k++ {
		gap = min(gap, ms[k]-ms[k-1])
	}
	if len(ms) > 1 {
		gap = min(gap, 60-ms[len(ms)-1]+ms[0])
	}
	if gap < 5 {
		return fmt.Sprintf("it would run every %d minute(s), and GitHub runs schedules at most every 5 minutes", gap)
	}
	return ""
}

// parseCronField parses one field into the set of values it selects.
func parseCronField(f string, spec cronField) ([]bool, string) {
	set := make([]bool, spec.max+1)
	value := func(s string) (int, string) {
		if n, err := strconv.Atoi(s); err == nil {
			if n < spec.min || n > spec.max {
				return 0, fmt.Sprintf("%d is out of range %d-%d", n, spec.min, spec.max)
			}
			return n, ""
		}
		if k := slices.Index(spec.names, strings.ToUpper(s)); k >= 0 {
			return spec.min + k, ""
		}
		return 0, fmt.Sprintf("%q is not a number", s)
	}
	for _, part := range strings.Split(f, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n <= 0 {
				return nil, fmt.Sprintf("invalid step %q", stepText)
			}
			step = n
		}
		lo, hi := spec.min, spec.max
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var msg string
			if lo, msg = value(a); msg != "" {
				return nil, msg
			}
			if hi, msg = value(b); msg != "" {
				return nil, msg
			}
			if lo > hi {
				return nil, fmt.Sprintf("the range %s runs backwards", rng)
			}
		default:
			var msg string
			if lo, msg = value(rng); msg != "" {
				return nil, msg
			}
			if hasStep {
				hi = spec.max // "5/15" means from 5 on, every 15
			} else {
				hi = lo
			}
		}
		for n := lo; n <= hi; n += step {
			set[n] = true
		}
	}
	return set, ""
}

// dispatchInputs reads on.workflow_dispatch: its inputs.
func (g *ghCompiler) dispatchInputs(config *yaml.Node) []Input {
	c := g.c
	entries, ok := c.ghMapping(config, `"workflow_dispatch"`, false)
	if !ok {
		return nil
	}
	var out []Input
	for _, e := range entries {
		if e.name != "inputs" {
			c.ghUnknownKey(e, `"workflow_dispatch"`, []string{"inputs"})
			continue
		}
		inputs, ok := c.ghMapping(e.val, `"inputs" of workflow_dispatch`, true)
		if !ok {
			continue
		}
		if len(inputs) > 25 {
			c.at(e.key, RuleInput, "workflow_dispatch has %d inputs, more than the 25 GitHub allows", len(inputs))
		}
		for _, ie := range inputs {
			out = append(out, g.input(ie, true).Input)
		}
	}
	return out
}

// ghInput is an input as read, with the nodes findings point at.
type ghInput struct {
	Input
	key         *yaml.Node
	def         string // the default as written
	hasDef      bool
	defaultNode *yaml.Node
}

var (
	ghDispatchTypes  = []string{"boolean", "choice", "environment", "number", "string"}
	ghCallInputTypes = []string{"boolean", "number", "string"}
)

// input reads one input of workflow_dispatch (dispatch) or workflow_call.
func (g *ghCompiler) input(e entry, dispatch bool) ghInput {
	c := g.c
	in := ghInput{Input: Input{Name: e.name}, key: e.key}
	where := "workflow_call"
	keys, types := []string{"default", "description", "required", "type"}, ghCallInputTypes
	if dispatch {
		where = "workflow_dispatch"
		keys, types = []string{"default", "description", "options", "required", "type"}, ghDispatchTypes
	}
	entries, ok := c.ghMapping(e.val, fmt.Sprintf("input %q", e.name), false)
	if !ok {
		return in
	}
	var optionNodes []*yaml.Node
	var optionsKey *yaml.Node
	for _, ie := range entries {
		switch ie.name {
		case "description":
			in.Description, _ = c.ghString(ie.val, "a description")
		case "required":
			var expr string
			in.Required, expr, _ = c.ghBool(ie.val, `"required"`)
			if expr != "" {
				c.at(c.resolve(ie.val), RuleInput, `"required" of input %q must be true or false; it cannot be computed`, e.name)
			}
		case "default":
			v := c.resolve(ie.val)
			if v.Kind != yaml.ScalarNode {
				c.at(v, RuleType, "the default of input %q must be a string, number or boolean, got %s", e.name, kindName(v))
				continue
			}
			in.def, in.hasDef, in.defaultNode = v.Value, !isNull(v), v
		case "type":
			ty, ok := c.ghNonEmpty(ie.val, fmt.Sprintf("the type of input %q", e.name))
			if !ok {
				continue
			}
			if !slices.Contains(types, ty) {
				c.at(c.resolve(ie.val), RuleInput, "unknown type %q of input %q of %s%s (types: %s)", ty, e.name, where, didYouMean(c.suggest(ty, types)), strings.Join(types, ", "))
				continue
			}
			in.Type = ty
		case "options":
			if !dispatch {
				c.ghUnknownKey(ie, fmt.Sprintf("input %q of %s", e.name, where), keys)
				continue
			}
			optionsKey = ie.key
			in.Options, optionNodes = c.ghStrings(ie.val, `"options"`, true)
		default:
			c.ghUnknownKey(ie, fmt.Sprintf("input %q of %s", e.name, where), keys)
		}
	}
	switch {
	case in.Type == "" && !dispatch && !slices.ContainsFunc(entries, func(x entry) bool { return x.name == "type" }):
		c.at(e.key, RuleInput, "input %q of workflow_call has no \"type\" (boolean, number or string)", e.name)
	case in.Type == "" && dispatch:
		in.Type = "string"
	}
	if dispatch {
		g.checkChoice(&in, optionsKey, optionNodes)
	}
	if in.hasDef && !hasExpr(in.def) {
		g.checkDefault(&in, where)
	}
	if !dispatch && in.Required && in.hasDef {
		c.at(in.defaultNode, RuleInput, "input %q of workflow_call is required, so its default %q is never used; drop one of them", e.name, in.def)
	}
	if in.hasDef {
		def := in.def
		in.Input.Default = &def
	}
	return in
}

// checkChoice checks the options of a choice input, and that only choice
// inputs have options.
func (g *ghCompiler) checkChoice(in *ghInput, optionsKey *yaml.Node, nodes []*yaml.Node) {
	c := g.c
	if in.Type != "choice" {
		if optionsKey != nil {
			c.at(optionsKey, RuleInput, "input %q has options, but only a choice input takes them (its type is %q)", in.Name, in.Type)
		}
		return
	}
	if len(in.Options) == 0 {
		c.at(in.key, RuleInput, "choice input %q has no options", in.Name)
		return
	}
	seen := map[string]bool{}
	for i, o := range in.Options {
		if seen[o] {
			c.at(nodes[i], RuleInput, "option %q of input %q is listed twice", o, in.Name)
		}
		seen[o] = true
	}
	if in.hasDef && !seen[in.def] {
		c.at(in.defaultNode, RuleInput, "the default %q of choice input %q is not one of its options (%s)%s", in.def, in.Name, strings.Join(in.Options, ", "), didYouMean(c.suggest(in.def, in.Options)))
	}
}

// checkDefault checks that a default that is not an expression fits the
// input's type.
func (g *ghCompiler) checkDefault(in *ghInput, where string) {
	switch in.Type {
	case "boolean":
		if d := strings.ToLower(in.def); d != "true" && d != "false" {
			g.c.at(in.defaultNode, RuleInput, "the default %q of boolean input %q of %s must be true or false", in.def, in.Name, where)
		}
	case "number":
		if _, err := strconv.ParseFloat(strings.TrimSpace(in.def), 64); err != nil {
			g.c.at(in.defaultNode, RuleInput, "the default %q of number input %q of %s is not a number", in.def, in.Name, where)
		}
	}
}

// ghCallSpec is what a reusable workflow declares in on.workflow_call.
type ghCallSpec struct {
	node    *yaml.Node // the workflow_call key
	inputs  []ghInput
	outputs []ghCallOutput
	secrets []ghCallSecret
}

type ghCallOutput struct {
	name, value string
	key, node   *yaml.Node
}

type ghCallSecret struct {
	name     string
	required bool
}

func (s *ghCallSpec) input(name string) *ghInput {
	for i := range s.inputs {
		if strings.EqualFold(s.inputs[i].Name, name) {
			return &s.inputs[i]
		}
	}
	return nil
}

func (s *ghCallSpec) secret(name string) *ghCallSecret {
	for i := range s.secrets {
		if strings.EqualFold(s.secrets[i].name, name) {
			return &s.secrets[i]
		}
	}
	return nil
}

// callSpec reads on.workflow_call: inputs, outputs and secrets.
func (g *ghCompiler) callSpec(nameNode, config *yaml.Node) *ghCallSpec {
	c := g.c
	spec := &ghCallSpec{node: nameNode}
	entries, ok := c.ghMapping(config, `"workflow_call"`, false)
	if !ok {
		return spec
	}
	for _, e := range entries {
		switch e.name {
		case "inputs":
			inputs, _ := c.ghMapping(e.val, `"inputs" of workflow_call`, true)
			for _, ie := range inputs {
				spec.inputs = append(spec.inputs, g.input(ie, false))
			}
		case "outputs":
			outputs, _ := c.ghMapping(e.val, `"outputs" of workflow_call`, true)
			for _, oe := range outputs {
				out := ghCallOutput{name: oe.name, key: oe.key}
				fields, ok := c.ghMapping(oe.val, fmt.Sprintf("output %q", oe.name), false)
				if !ok {
					continue
				}
				hasValue := false
				for _, f := range fields {
					switch f.name {
					case "description":
						c.ghString(f.val, "a description")
					case "value":
						hasValue = true
						out.value, _ = c.ghNonEmpty(f.val, fmt.Sprintf("the value of output %q", oe.name))
						out.node = c.resolve(f.val)
					default:
						c.ghUnknownKey(f, fmt.Sprintf("output %q of workflow_call", oe.name), []string{"description", "value"})
					}
				}
				if !hasValue {
					c.at(oe.key, RuleCall, "output %q of workflow_call has no \"value\"", oe.name)
				}
				spec.outputs = append(spec.outputs, out)
			}
		case "secrets":
			secrets, _ := c.ghMapping(e.val, `"secrets" of workflow_call`, true)
			for _, se := range secrets {
				s := ghCallSecret{name: se.name}
				fields, _ := c.ghMapping(se.val, fmt.Sprintf("secret %q", se.name), false)
				for _, f := range fields {
					switch f.name {
					case "description":
						c.ghString(f.val, "a description")
					case "required":
						var expr string
						s.required, expr, _ = c.ghBool(f.val, `"required"`)
						if expr != "" {
							c.at(c.resolve(f.val), RuleCall, `"required" of secret %q must be true or false; it cannot be computed`, se.name)
						}
					default:
						c.ghUnknownKey(f, fmt.Sprintf("secret %q of workflow_call", se.name), []string{"description", "required"})
					}
				}
				spec.secrets = append(spec.secrets, s)
			}
		default:
			c.ghUnknownKey(e, `"workflow_call"`, []string{"inputs", "outputs", "secrets"})
		}
	}
	return spec
}
