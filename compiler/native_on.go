package compiler

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// nativeEvents are the events a native pipeline can be triggered by.
var nativeEvents = []string{"manual", "pull_request", "push", "schedule", "tag"}

// nativeEventKeys are the keys of each event's configuration.
var nativeEventKeys = map[string][]string{
	"push":         {"branches", "paths"},
	"pull_request": {"branches", "paths", "types"},
	"tag":          {"tags"},
	"manual":       {"inputs"},
}

// nativePRTypes are the pull request activities a trigger can name.
var nativePRTypes = []string{"closed", "edited", "labeled", "opened", "ready_for_review", "reopened", "synchronize"}

// nativeOn reads the triggers of a native pipeline: an event name, a list
// of them, or a mapping of events to their filters. Filters are GitHub's
// patterns: "*" stays within a path segment, "**" crosses them, and a
// pattern starting with "!" excludes what the patterns before it
// included.
func (c *checker) nativeOn(v *yaml.Node) []Trigger {
	v = c.resolve(v)
	if isNull(v) {
		c.at(v, RuleEvent, `"on" is empty, so nothing triggers the pipeline; name an event such as push`)
		return nil
	}
	type event struct {
		name   string
		key    *yaml.Node
		config *yaml.Node // nil when the event is only named
	}
	var events []event
	switch {
	case v.Kind == yaml.ScalarNode:
		events = append(events, event{name: v.Value, key: v})
	case v.Kind == yaml.SequenceNode:
		for _, item := range v.Content {
			iv := c.resolve(item)
			name, ok := text(iv)
			if !ok {
				c.at(item, RuleType, `entries of "on" must be event names, got %s`, kindName(iv))
				continue
			}
			events = append(events, event{name: name, key: item})
		}
	case v.Kind == yaml.MappingNode:
		for _, e := range c.entries(v) {
			ev := event{name: e.name, key: e.key}
			if cfg := c.resolve(e.val); !isNull(cfg) {
				ev.config = cfg
			}
			events = append(events, ev)
		}
	default:
		c.at(v, RuleType, `"on" must be an event name, a list of them or a mapping of events to filters, got %s`, kindName(v))
		return nil
	}
	var out []Trigger
	for _, ev := range events {
		if !slices.Contains(nativeEvents, ev.name) {
			c.at(ev.key, RuleEvent, "unknown event %q%s (events: %s)", ev.name, didYouMean(c.suggest(ev.name, nativeEvents)), list(nativeEvents))
			continue
		}
		t := Trigger{Event: ev.name}
		if ev.name == "tag" {
			t = Trigger{Event: "push", Tags: []string{"**"}}
		}
		switch {
		case ev.config == nil:
		case ev.name == "schedule":
			if t.Schedules = c.nativeSchedules(ev.config); len(t.Schedules) > 0 {
				c.runWarnings = append(c.runWarnings, c.notHonoured(ev.key, scheduleNotRun))
			}
		case ev.config.Kind != yaml.MappingNode:
			c.at(ev.config, RuleType, "the configuration of event %q must be a mapping (keys: %s), got %s", ev.name, list(nativeEventKeys[ev.name]), kindName(ev.config))
			continue
		default:
			c.nativeEventConfig(&t, ev.name, ev.config)
		}
		out = append(out, t)
	}
	return out
}

func (c *checker) nativeEventConfig(t *Trigger, name string, config *yaml.Node) {
	own := owner{}
	for _, e := range c.entries(config) {
		val := c.resolve(e.val)
		if valid := nativeEventKeys[name]; !slices.Contains(valid, e.name) {
			hint := didYouMean(c.suggest(e.name, valid))
			if e.name == "tags" {
				hint = `; tags are filtered by the "tag" event`
			}
			c.at(e.key, RuleKey, "unknown key %q in event %q%s (keys: %s)", e.name, name, hint, list(valid))
			continue
		}
		switch e.name {
		case "branches", "paths", "tags":
			patterns := c.stringList(val, e.name, own)
			nodes := []*yaml.Node{val}
			if val.Kind == yaml.SequenceNode {
				nodes = val.Content
			}
			for _, n := range nodes {
				if rn := c.resolve(n); rn.Kind == yaml.ScalarNode {
					c.ghCheckGlob(rn, e.name != "paths")
				}
			}
			c.ghCheckNegations(e, patterns)
			if patterns == nil {
				patterns = []string{}
			}
			switch e.name {
			case "branches":
				t.Branches = patterns
			case "paths":
				t.Paths = patterns
			case "tags":
				t.Tags = patterns
			}
		case "types":
			for _, ty := range c.stringList(val, e.name, own) {
				if c.oneOf(val, ty, "pull request activity", nativePRTypes, own) {
					t.Types = append(t.Types, ty)
				}
			}
		case "inputs":
			t.Inputs = c.nativeInputs(val)
		}
	}
}

// nativeSchedules reads cron schedules: strings, or mappings with "cron".
func (c *checker) nativeSchedules(v *yaml.Node) []Schedule {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	var out []Schedule
	for _, item := range items {
		n := c.resolve(item)
		if n.Kind == yaml.MappingNode {
			var cron *yaml.Node
			for _, e := range c.entries(n) {
				if e.name != "cron" {
					c.unknownKey(e, owner{}, []string{"cron"})
					continue
				}
				cron = c.resolve(e.val)
			}
			if cron == nil {
				c.at(n, RuleSchedule, `a schedule needs "cron"`)
				continue
			}
			n = cron
		}
		spec, ok := text(n)
		if !ok {
			c.at(n, RuleType, "a schedule must be a cron string such as \"0 3 * * *\", got %s", kindName(n))
			continue
		}
		if msg := checkCron(spec); msg != "" {
			c.at(n, RuleSchedule, "invalid cron schedule %q: %s", spec, msg)
			continue
		}
		out = append(out, Schedule{Cron: spec})
	}
	return out
}

// nativeInputTypes are the types of a manual run's inputs.
var nativeInputTypes = []string{"boolean", "choice", "number", "string"}

// nativeInputs reads the inputs of a manual run: names to {type,
// description, required, default, options}.
func (c *checker) nativeInputs(v *yaml.Node) []Input {
	if isNull(v) {
		return nil
	}
	if v.Kind != yaml.MappingNode {
		c.at(v, RuleType, `"inputs" must be a mapping of input names to their definitions, got %s`, kindName(v))
		return nil
	}
	own := owner{}
	var out []Input
	for _, e := range c.entries(v) {
		if !validEnvName(e.name) {
			c.at(e.key, RuleInput, "invalid input name %q: inputs are exposed as environment variables, so names start with a letter or _ and hold only letters, digits and _", e.name)
			continue
		}
		in := Input{Name: e.name, Type: "string"}
		def := c.resolve(e.val)
		if def.Kind != yaml.MappingNode && !isNull(def) {
			c.at(def, RuleType, "input %q must be a mapping with type, default, required, options or description, got %s", e.name, kindName(def))
			continue
		}
		var defNode, optsNode *yaml.Node
		if def.Kind == yaml.MappingNode {
			for _, k := range c.entries(def) {
				val := c.resolve(k.val)
				switch k.name {
				case "type":
					if ty, ok := c.scalar(val, k.name, own); ok && c.oneOf(val, ty, "input type", nativeInputTypes, own) {
						in.Type = ty
					}
				case "description":
					in.Description, _ = c.scalar(val, k.name, own)
				case "required":
					in.Required = c.boolean(val, k.name, own)
				case "default":
					if s, ok := c.scalar(val, k.name, own); ok {
						in.Default, defNode = &s, val
					}
				case "options":
					in.Options, optsNode = c.stringList(val, k.name, own), val
				default:
					c.unknownKey(k, own, []string{"default", "description", "options", "required", "type"})
				}
			}
		}
		switch {
		case in.Type == "choice" && len(in.Options) == 0:
			c.at(e.key, RuleInput, `input %q is a choice but has no "options"`, e.name)
		case in.Type != "choice" && optsNode != nil:
			c.at(optsNode, RuleInput, `input %q has "options" but is not of type choice`, e.name)
		case in.Default != nil && in.Type == "choice" && !slices.Contains(in.Options, *in.Default):
			c.at(defNode, RuleInput, "the default %q of input %q is not one of its options (%s)", *in.Default, e.name, strings.Join(in.Options, ", "))
		case in.Default != nil && in.Type == "boolean" && *in.Default != "true" && *in.Default != "false":
			c.at(defNode, RuleInput, "the default %q of boolean input %q must be true or false", *in.Default, e.name)
		}
		out = append(out, in)
	}
	return out
}

// scheduleNotRun says that schedules are accepted and do not start runs.
const scheduleNotRun = "schedule is not run yet: no run starts on its own at these times"
