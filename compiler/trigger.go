package compiler

import (
	"fmt"
	"slices"
	"strings"
)

// Trigger is one kind of event that starts a pipeline, with the filters
// that narrow it: GitHub's on: entries, and the native format's triggers.
// It is format-neutral: events are named in Event.Name's vocabulary, and
// filters use GitHub's filter patterns (see Plan.Triggered).
//
// A nil filter slice means the filter is absent; a non-nil empty one is a
// filter that matches nothing.
type Trigger struct {
	// Event is the kind of event: "push" (of a branch or a tag),
	// "pull_request", "schedule", "manual" (GitHub's workflow_dispatch),
	// or a provider's own name ("pull_request_target", "release",
	// "workflow_call", "workflow_run" …).
	Event string `json:"event"`
	// Types are the activity types that trigger ("opened", "closed" …);
	// nil means all of them. For GitHub's pull_request and
	// pull_request_target it holds the default types when none are
	// written.
	Types []string `json:"types,omitempty"`
	// Branches and BranchesIgnore filter the branch: the pushed branch,
	// the base branch of a pull request, the head branch of a workflow
	// run. At most one of them is set.
	Branches       []string `json:"branches,omitempty"`
	BranchesIgnore []string `json:"branches_ignore,omitempty"`
	// Tags and TagsIgnore filter the pushed tag. At most one is set.
	Tags       []string `json:"tags,omitempty"`
	TagsIgnore []string `json:"tags_ignore,omitempty"`
	// Paths and PathsIgnore filter the changed files. At most one is set.
	Paths       []string `json:"paths,omitempty"`
	PathsIgnore []string `json:"paths_ignore,omitempty"`
	// Workflows names the workflows whose runs trigger (workflow_run).
	Workflows []string `json:"workflows,omitempty"`
	// Schedules are the cron schedules of a "schedule" trigger.
	Schedules []Schedule `json:"schedules,omitempty"`
	// Inputs are the inputs a manual run (or a call) takes, in file
	// order.
	Inputs []Input `json:"inputs,omitempty"`
}

// Schedule is one cron schedule.
type Schedule struct {
	// Cron has five fields: minute, hour, day of month, month, day of
	// week (POSIX cron).
	Cron string `json:"cron"`
	// Timezone is an IANA time zone name; "" means UTC.
	Timezone string `json:"timezone,omitempty"`
}

// Input is an input of a manual run or of a reusable workflow.
type Input struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Type is "string", "boolean", "number", "choice" or "environment".
	Type     string `json:"type"`
	Required bool   `json:"required,omitempty"`
	// Default is the default as written; nil when there is none.
	Default *string `json:"default,omitempty"`
	// Options are the choices of a "choice" input.
	Options []string `json:"options,omitempty"`
}

// Triggered reports whether ev starts the pipeline, and why or why not in
// words for a person. A nil event, and a plan that declares no triggers,
// are always triggered: there is nothing to decide with. Fields of ev that
// are unknown (zero) never exclude: a filter that needs them is taken as
// passed, and the reason says so.
//
// The filter semantics are GitHub's:
//
//   - branches (or branches-ignore) and tags (or tags-ignore) of a push:
//     when only one of the two kinds is filtered, pushes of the other
//     kind do not trigger; when neither is, both do;
//   - a pull request's branches are its base branch;
//   - paths trigger when at least one changed file matches, paths-ignore
//     when at least one changed file is not ignored; tag pushes ignore
//     path filters;
//   - patterns follow GitHub's filter pattern cheat sheet (matchFilter).
//
// Event names are compared after mapping synonyms: "tag" is a push of a
// tag, "merge_request" a pull request, "workflow_dispatch" a manual run.
func (p *Plan) Triggered(ev *Event) (ok bool, reason string) {
	if ev == nil {
		return true, "no event given: triggers are not checked"
	}
	if len(p.Triggers) == 0 {
		return true, "the pipeline declares no triggers"
	}
	name := canonicalEvent(ev.Name)
	var declared []string
	firstReason := ""
	for i := range p.Triggers {
		t := &p.Triggers[i]
		declared = append(declared, t.Event)
		if canonicalEvent(t.Event) != name {
			continue
		}
		ok, why := t.matches(name, ev)
		if ok {
			return true, why
		}
		if firstReason == "" {
			firstReason = why
		}
	}
	if firstReason != "" {
		return false, firstReason
	}
	return false, fmt.Sprintf("the pipeline is not triggered by %s events (triggers: %s)", eventLabel(ev.Name), strings.Join(declared, ", "))
}

// canonicalEvent maps the synonyms of Event.Name to one name.
// SkippedByPaths reports whether ev does not trigger the pipeline only
// because of its path filters: with the changed files unknown, it would.
// A platform reports such a pipeline as a success ("skipped: no matching
// paths"), so that a check a branch protection requires does not wait
// forever for a run that will never come.
func (p *Plan) SkippedByPaths(ev *Event) bool {
	if ev == nil || ev.ChangedFiles == nil {
		return false
	}
	if ok, _ := p.Triggered(ev); ok {
		return false
	}
	unknown := *ev
	unknown.ChangedFiles = nil
	ok, _ := p.Triggered(&unknown)
	return ok
}

func canonicalEvent(name string) string {
	switch name {
	case "tag":
		return "push"
	case "merge_request":
		return "pull_request"
	case "workflow_dispatch":
		return "manual"
	}
	return name
}

func eventLabel(name string) string {
	if name == "" {
		return "unnamed"
	}
	return fmt.Sprintf("%q", name)
}

// matches decides one trigger whose event is name.
func (t *Trigger) matches(name string, ev *Event) (bool, string) {
	var notes []string
	if t.Types != nil {
		action, _ := ev.Payload["action"].(string)
		switch {
		case action == "":
			notes = append(notes, "activity type unknown")
		case !slices.Contains(t.Types, action):
			return false, fmt.Sprintf("%s activity %q is not one of the types %s", name, action, bracket(t.Types))
		}
	}
	branch, tag := refNames(ev)
	checkPaths := false
	switch name {
	case "push":
		hasBranchFilter := t.Branches != nil || t.BranchesIgnore != nil
		hasTagFilter := t.Tags != nil || t.TagsIgnore != nil
		switch {
		case tag != "":
			if !hasTagFilter && hasBranchFilter {
				return false, fmt.Sprintf("push of tag %q: the push trigger filters only branches, so tag pushes do not trigger", tag)
			}
			if ok, why := includeExclude("tag", tag, t.Tags, t.TagsIgnore, "tags"); !ok {
				return false, "push of " + why
			}
		case branch != "":
			if !hasBranchFilter && hasTagFilter {
				return false, fmt.Sprintf("push to branch %q: the push trigger filters only tags, so branch pushes do not trigger", branch)
			}
			if ok, why := includeExclude("branch", branch, t.Branches, t.BranchesIgnore, "branches"); !ok {
				return false, "push to " + why
			}
			checkPaths = true
		default:
			if hasBranchFilter || hasTagFilter {
				notes = append(notes, "ref unknown")
			}
			checkPaths = true
		}
	case "pull_request", "pull_request_target", "merge_group":
		if t.Branches != nil || t.BranchesIgnore != nil {
			if ev.BaseBranch == "" {
				notes = append(notes, "base branch unknown")
			} else if ok, why := includeExclude("base branch", ev.BaseBranch, t.Branches, t.BranchesIgnore, "branches"); !ok {
				return false, name + " into " + why
			}
		}
		checkPaths = name != "merge_group"
	case "workflow_run":
		if t.Branches != nil || t.BranchesIgnore != nil {
			if branch == "" {
				notes = append(notes, "branch unknown")
			} else if ok, why := includeExclude("branch", branch, t.Branches, t.BranchesIgnore, "branches"); !ok {
				return false, "workflow run on " + why
			}
		}
		if t.Workflows != nil {
			wr, _ := ev.Payload["workflow_run"].(map[string]any)
			wf, _ := wr["name"].(string)
			switch {
			case wf == "":
				notes = append(notes, "triggering workflow unknown")
			case !slices.Contains(t.Workflows, wf):
				return false, fmt.Sprintf("workflow run of %q: not one of the workflows %s", wf, bracket(t.Workflows))
			}
		}
	}
	if checkPaths && (t.Paths != nil || t.PathsIgnore != nil) {
		if ev.ChangedFiles == nil {
			notes = append(notes, "changed files unknown")
		} else if ok, why := t.pathsMatch(ev.ChangedFiles); !ok {
			return false, why
		}
	}
	why := fmt.Sprintf("triggered by %s", name)
	switch {
	case tag != "" && name == "push":
		why += fmt.Sprintf(" of tag %q", tag)
	case branch != "" && (name == "push" || name == "workflow_run"):
		why += fmt.Sprintf(" on branch %q", branch)
	case ev.BaseBranch != "" && strings.HasPrefix(name, "pull_request"):
		why += fmt.Sprintf(" into %q", ev.BaseBranch)
	}
	if len(notes) > 0 {
		why += " (not checked: " + strings.Join(notes, ", ") + ")"
	}
	return true, why
}

// pathsMatch applies the path filters to the changed files.
func (t *Trigger) pathsMatch(files []string) (bool, string) {
	if t.Paths != nil {
		for _, f := range files {
			if matchFilter(t.Paths, f) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("none of the %d changed files matches the paths %s", len(files), bracket(t.Paths))
	}
	for _, f := range files {
		if !matchFilter(t.PathsIgnore, f) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("all %d changed files match the paths-ignore %s", len(files), bracket(t.PathsIgnore))
}

// includeExclude applies an include filter or an ignore filter (at most
// one is set) to name, a branch or tag.
func includeExclude(what, name string, include, ignore []string, key string) (bool, string) {
	switch {
	case include != nil && !matchFilter(include, name):
		return false, fmt.Sprintf("%s %q: not matched by %s %s", what, name, key, bracket(include))
	case ignore != nil && matchFilter(ignore, name):
		return false, fmt.Sprintf("%s %q: matched by %s-ignore %s", what, name, key, bracket(ignore))
	}
	return true, ""
}

// refNames returns the branch and tag an event is about, from Branch and
// Tag or, when they are empty, from Ref.
func refNames(ev *Event) (branch, tag string) {
	branch, tag = ev.Branch, ev.Tag
	if branch == "" && tag == "" {
		if b, ok := strings.CutPrefix(ev.Ref, "refs/heads/"); ok {
			branch = b
		} else if t, ok := strings.CutPrefix(ev.Ref, "refs/tags/"); ok {
			tag = t
		}
	}
	return branch, tag
}

func bracket(items []string) string {
	return "[" + strings.Join(items, ", ") + "]"
}

// matchFilter reports whether s is matched by a list of GitHub filter
// patterns (branches, tags or paths). Patterns are read in order: a pattern
// that matches s sets the result to true, or to false when it is negated
// with a leading '!'; a pattern that does not match changes nothing. So a
// negated pattern excludes what the patterns before it included, and a
// later positive one includes it again.
//
// Within a pattern (GitHub's filter pattern cheat sheet):
//
//   - '*' matches any characters but '/';
//   - '**' matches any characters, '/' included; "**/" also matches
//     nothing, so "**/README.md" matches "README.md";
//   - '?' makes the preceding character (or [] class) optional, '+'
//     repeats it one or more times;
//   - '[...]' matches one character listed, or in a range such as 0-9;
//   - '\' makes the next character literal;
//   - everything else matches itself, and the whole of s must match.
func matchFilter(patterns []string, s string) bool {
	matched := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if matched == neg && globMatch(compileGlob(p), s) {
			matched = !neg
		}
	}
	return matched
}

// globTok is one element of a compiled filter pattern.
type globTok struct {
	kind  globKind
	char  rune    // globChar
	class []rune  // globClass: pairs of inclusive range bounds
	rep   globRep // how often the element may repeat
}

type globKind uint8

const (
	globChar     globKind = iota // one given character
	globClass                    // one character of a class
	globStar                     // '*': any run without '/'
	globStarStar                 // '**': any run
	globDirs                     // '**/': nothing, or any run ending in '/'
)

type globRep uint8

const (
	repOne      globRep = iota
	repOptional         // '?'
	repMore             // '+'
)

// compileGlob turns a pattern (without its '!') into tokens. Malformed
// parts are read literally: a '?' or '+' with nothing to apply to, a '['
// without its ']'.
func compileGlob(p string) []globTok {
	rs := []rune(p)
	var toks []globTok
	quantifiable := func() bool {
		if len(toks) == 0 {
			return false
		}
		last := toks[len(toks)-1]
		return (last.kind == globChar || last.kind == globClass) && last.rep == repOne
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch r {
		case '\\':
			if i+1 < len(rs) {
				i++
				r = rs[i]
			}
			toks = append(toks, globTok{kind: globChar, char: r})
		case '*':
			if i+1 < len(rs) && rs[i+1] == '*' {
				i++
				if i+1 < len(rs) && rs[i+1] == '/' {
					i++
					toks = append(toks, globTok{kind: globDirs})
				} else {
					toks = append(toks, globTok{kind: globStarStar})
				}
				continue
			}
			toks = append(toks, globTok{kind: globStar})
		case '?', '+':
			if !quantifiable() {
				toks = append(toks, globTok{kind: globChar, char: r})
				continue
			}
			if r == '?' {
				toks[len(toks)-1].rep = repOptional
			} else {
				toks[len(toks)-1].rep = repMore
			}
		case '[':
			class, end := parseClass(rs, i)
			if end < 0 {
				toks = append(toks, globTok{kind: globChar, char: r})
				continue
			}
			toks = append(toks, globTok{kind: globClass, class: class})
			i = end
		default:
			toks = append(toks, globTok{kind: globChar, char: r})
		}
	}
	return toks
}

// parseClass reads the class that starts at rs[i] == '['. It returns the
// class as range pairs and the index of the closing ']', or -1 when there
// is none or the class is empty.
func parseClass(rs []rune, i int) ([]rune, int) {
	var class []rune
	j := i + 1
	for ; j < len(rs) && rs[j] != ']'; j++ {
		lo := rs[j]
		if lo == '\\' && j+1 < len(rs) {
			j++
			lo = rs[j]
		}
		hi := lo
		if j+2 < len(rs) && rs[j+1] == '-' && rs[j+2] != ']' {
			hi = rs[j+2]
			j += 2
		}
		class = append(class, lo, hi)
	}
	if j >= len(rs) || len(class) == 0 {
		return nil, -1
	}
	return class, j
}

func (t *globTok) single(r rune) bool {
	switch t.kind {
	case globChar:
		return r == t.char
	case globClass:
		for k := 0; k+1 < len(t.class); k += 2 {
			if t.class[k] <= r && r <= t.class[k+1] {
				return true
			}
		}
	}
	return false
}

// globMatch matches the whole of s against toks. It memoizes on (token,
// position), so it is O(len(toks) × len(s)²) at worst whatever the
// pattern, and a hostile pattern cannot make it exponential.
func globMatch(toks []globTok, s string) bool {
	rs := []rune(s)
	n := len(rs) + 1
	memo := make([]int8, (len(toks)+1)*n) // 0 unknown, 1 true, 2 false
	var match func(ti, si int) bool
	match = func(ti, si int) bool {
		if ti == len(toks) {
			return si == len(rs)
		}
		m := &memo[ti*n+si]
		if *m != 0 {
			return *m == 1
		}
		ok := false
		t := &toks[ti]
		switch t.kind {
		case globStar:
			for k := si; ; k++ {
				if match(ti+1, k) {
					ok = true
					break
				}
				if k == len(rs) || rs[k] == '/' {
					break
				}
			}
		case globStarStar:
			for k := si; k <= len(rs) && !ok; k++ {
				ok = match(ti+1, k)
			}
		case globDirs:
			ok = match(ti+1, si)
			for k := si; k < len(rs) && !ok; k++ {
				if rs[k] == '/' {
					ok = match(ti+1, k+1)
				}
			}
		default:
			switch t.rep {
			case repOne:
				ok = si < len(rs) && t.single(rs[si]) && match(ti+1, si+1)
			case repOptional:
				ok = match(ti+1, si) || si < len(rs) && t.single(rs[si]) && match(ti+1, si+1)
			case repMore:
				for k := si; k < len(rs) && t.single(rs[k]) && !ok; k++ {
					ok = match(ti+1, k+1)
				}
			}
		}
		if ok {
			*m = 1
		} else {
			*m = 2
		}
		return ok
	}
	return match(0, 0)
}
