package compiler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cikit/cikit"
)

// ghContainerOptions is what the options of a GitHub container or
// service say: the flags cikit maps to fields, and the words left.
type ghContainerOptions struct {
	user   string
	health *cikit.ServiceHealth
	rest   []string
	// warnings are the findings about the options, for JobSpec.Warnings
	// (see checker.notHonoured).
	warnings []string
}

// ghKeptFlags are the docker create flags left in ImageOptions.Options
// that a runner without a container daemon can still apply: the
// environment, the working directory, the entrypoint and the host name.
// Any other flag is reported as not honoured.
var ghKeptFlags = map[string]bool{
	"--env": true, "-e": true, "--workdir": true, "-w": true,
	"--entrypoint": true, "--hostname": true,
}

// ghBoolFlags are the docker create flags that take no value, so the
// word after them is not theirs.
var ghBoolFlags = map[string]bool{
	"--privileged": true, "--init": true, "--read-only": true, "--rm": true,
	"--tty": true, "-t": true, "--interactive": true, "-i": true, "--detach": true, "-d": true,
	"--no-healthcheck": true, "--oom-kill-disable": true, "--publish-all": true, "-P": true,
	"--sig-proxy": true, "--disable-content-trust": true, "--help": true,
}

// containerOptions reads the options string s of a container (service
// false) or a service, written at v. --user and -u set the user; for a
// service, the --health-* flags set its health check. Nothing here is an
// error: docker's own complaints about the options would only come when
// the job starts, so findings are warnings.
func (c *checker) containerOptions(v *yaml.Node, s string, service bool) ghContainerOptions {
	var out ghContainerOptions
	warn := func(format string, args ...any) {
		out.warnings = append(out.warnings, c.notHonoured(v, format, args...))
	}
	words, err := shellWords(s)
	if err != nil {
		warn("the options cannot be split into words (%v); they are not used", err)
		return out
	}
	kind := "container"
	if service {
		kind = "service"
	}
	health := &cikit.ServiceHealth{}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" {
			warn("option %q is not a flag; it is not used", w)
			continue
		}
		flag, value, hasValue := strings.Cut(w, "=")
		next := !hasValue && !ghBoolFlags[flag] && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-")
		if next {
			i++
			value, hasValue = words[i], true
		}
		switch {
		case (flag == "--user" || flag == "-u") && hasValue:
			out.user = value
			continue
		case service && hasValue && strings.HasPrefix(flag, "--health-"):
			if healthFlag(warn, health, flag, value) {
				continue
			}
		}
		if !ghKeptFlags[flag] {
			warn("%s option %q is not honoured: cikit's runner starts containers without a daemon and has no equivalent", kind, flag)
		}
		out.rest = append(out.rest, w)
		if next {
			out.rest = append(out.rest, value)
		}
	}
	if *health != (cikit.ServiceHealth{}) {
		out.health = health
	}
	return out
}

// healthFlag sets the field of h that flag names, and reports whether it
// is one of the health flags cikit maps. A value that docker would
// refuse is a warning, and leaves the field to the runner's default.
func healthFlag(warn func(format string, args ...any), h *cikit.ServiceHealth, flag, value string) bool {
	var d *time.Duration
	switch flag {
	case "--health-cmd":
		h.Cmd = value
		return true
	case "--health-retries":
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			warn("%s %q is not a number of retries; the runner's default is used", flag, value)
			return true
		}
		h.Retries = n
		return true
	case "--health-interval":
		d = &h.Interval
	case "--health-timeout":
		d = &h.Timeout
	case "--health-start-period":
		d = &h.StartPeriod
	default:
		return false
	}
	if hasExpr(value) {
		warn("%s %q is computed by an expression; the runner's default is used", flag, value)
		return true
	}
	x, err := time.ParseDuration(value)
	if err != nil || x < 0 {
		warn("%s %q is not a duration such as \"10s\"; the runner's default is used", flag, value)
		return true
	}
	*d = x
	return true
}

// shellWords splits s into words the way a POSIX shell does, without
// expansions: blanks separate words, single quotes keep everything,
// double quotes keep everything but backslash escapes of \, ", $ and `,
// and a backslash outside quotes keeps the next character. A GitHub
// expression, ${{ … }}, stays whole within its word, blanks and all, for
// the runner to expand.
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is open, possibly empty ("")
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case strings.HasPrefix(s[i:], "${{"):
			end := strings.Index(s[i:], "}}")
			if end < 0 {
				return nil, fmt.Errorf("an expression at offset %d is not closed with }}", i)
			}
			cur.WriteString(s[i : i+end+2])
			in, i = true, i+end+1
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case ch == '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf("a backslash ends the options")
			}
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
			}
			in = true
		case ch == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("a single quote at offset %d is not closed", i)
			}
			cur.WriteString(s[i+1 : i+1+end])
			in, i = true, i+1+end
		case ch == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\\\"$`", s[j+1]) >= 0 {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("a double quote at offset %d is not closed", i)
			}
			in, i = true, j
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
