package compiler

import (
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// glDurationUnits are the units GitLab's durations accept (it parses them
// with the chronic_duration gem): a month is 30 days, a year 365.
var glDurationUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "wk": 7 * 24 * time.Hour, "wks": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"mo": 30 * 24 * time.Hour, "mos": 30 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "months": 30 * 24 * time.Hour,
	"y": 365 * 24 * time.Hour, "yr": 365 * 24 * time.Hour, "yrs": 365 * 24 * time.Hour, "year": 365 * 24 * time.Hour, "years": 365 * 24 * time.Hour,
}

// parseGitLabDuration reads a duration as GitLab writes them: "3600" (seconds),
// "1h 30m", "1h30m", "3 hours", "10 minutes", "1 day and 2 hours",
// "1.5 hours", "2:30" (minutes:seconds) or "1:30:00". ok is false for
// text that is not a duration.
func parseGitLabDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, false
	}
	if d, ok := clockDuration(s); ok {
		return d, true
	}
	const limit = float64(1<<63-1) / float64(time.Second)
	var total float64 // seconds
	rest := s
	parts := 0
	for {
		rest = strings.TrimLeftFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == ',' })
		if after, ok := strings.CutPrefix(rest, "and "); ok && parts > 0 {
			rest = strings.TrimLeftFunc(after, unicode.IsSpace)
		}
		if rest == "" {
			break
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 {
			return 0, false
		}
		num, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, false
		}
		rest = strings.TrimLeft(rest[i:], " ")
		j := 0
		for j < len(rest) && rest[j] >= 'a' && rest[j] <= 'z' {
			j++
		}
		unit := time.Second
		if j > 0 {
			u, ok := glDurationUnits[rest[:j]]
			if !ok {
				return 0, false
			}
			unit = u
		}
		rest = rest[j:]
		total += num * unit.Seconds()
		if total > limit {
			return 0, false
		}
		parts++
	}
	return time.Duration(total * float64(time.Second)), true
}

// clockDuration reads "m:ss" and "h:mm:ss".
func clockDuration(s string) (time.Duration, bool) {
	fields := strings.Split(s, ":")
	if len(fields) < 2 || len(fields) > 3 {
		return 0, false
	}
	var total time.Duration
	for _, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > 1_000_000 {
			return 0, false
		}
		total = total*60 + time.Duration(n)*time.Second
	}
	return total, true
}

// glServiceName derives the host name GitLab gives a service without an
// alias: the image without tag or digest, "/" replaced by "__"
// ("tutum/wordpress:latest" is "tutum__wordpress").
func glServiceName(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	return strings.ReplaceAll(name, "/", "__")
}

// maxGlobAlternatives bounds the patterns a glob's braces expand to.
const maxGlobAlternatives = 256

// gitlabGlobMatch reports whether a repository path matches a GitLab path
// pattern (rules:changes, only:changes): Ruby's File.fnmatch with
// FNM_PATHNAME, FNM_DOTMATCH and FNM_EXTGLOB, so "*" stays within a
// directory, "**/" spans any number of them and "{a,b}" are alternatives.
func gitlabGlobMatch(pattern, name string) bool {
	for _, p := range expandBraces(pattern, maxGlobAlternatives) {
		if matchSegments(strings.Split(p, "/"), strings.Split(name, "/")) {
			return true
		}
	}
	return false
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// "**" as a whole segment matches zero or more directories.
			for skip := 0; skip <= len(name); skip++ {
				if matchSegments(pat[1:], name[skip:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// expandBraces expands "{a,b}" alternatives, at most limit of them.
func expandBraces(p string, limit int) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth := 0
	var commas []int
	closeAt := -1
	for i := open; i < len(p) && closeAt < 0; i++ {
		switch p[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				closeAt = i
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	if closeAt < 0 {
		return []string{p}
	}
	var alts []string
	start := open + 1
	for _, c := range append(commas, closeAt) {
		alts = append(alts, p[start:c])
		start = c + 1
	}
	var out []string
	for _, a := range alts {
		for _, rest := range expandBraces(p[:open]+a+p[closeAt+1:], limit) {
			if len(out) >= limit {
				return out
			}
			out = append(out, rest)
		}
	}
	return out
}

// isGlob reports whether a path pattern holds glob characters.
func isGlob(p string) bool { return strings.ContainsAny(p, "*?[{") }
