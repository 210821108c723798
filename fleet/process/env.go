package process

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// AllowedEnv returns the names of the host variables whose values a job
// gets by default (see HostEnv); a name ending in * stands for every name
// with that prefix. Nothing else of the executor's environment reaches a
// job: a server or runner holds its secrets in its environment (signing
// keys, webhook secrets, registration tokens, database URLs with
// passwords, cloud credentials), and a job's log is readable by whoever
// may read the run.
//
// Each is there because ordinary tools misbehave without it, and none
// holds credentials:
//
//   - PATH: where the job's shell finds programs.
//   - HOME, USER, LOGNAME: who the job runs as and where its tools keep
//     caches (go, npm, pip and git fail or fall back oddly without HOME).
//     Without a sandbox the job runs as the executor's user and can read
//     that user's home whatever HOME says; in a sandbox all three are
//     replaced by the sandbox's own.
//   - TMPDIR: where temporary files go; a sandbox sets its own /tmp.
//   - LANG, LANGUAGE, LC_*: the locale, which decides how tools decode
//     and print text.
//   - TZ: the time zone dates are printed in.
//
// TERM is left out: a job has no terminal, and tools that believe it has
// one write colour and cursor codes into its log. Proxy variables
// (http_proxy, HTTPS_PROXY) are left out because their URLs may carry a
// password. An operator who wants those, or any other, passes them by name
// with Config.PassEnv.
func AllowedEnv() []string {
	return []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LANGUAGE", "LC_*", "TZ"}
}

// HostEnv returns the variables of environ (NAME=value, as os.Environ
// returns them) whose names AllowedEnv or pass lists, in environ's order.
// It is the base environment of an Executor whose Config.Env is nil, with
// os.Environ() and Config.PassEnv.
func HostEnv(environ, pass []string) []string {
	names := append(AllowedEnv(), pass...)
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && slices.ContainsFunc(names, func(n string) bool { return envNameMatches(n, name) }) {
			out = append(out, kv)
		}
	}
	return out
}

// envNameMatches reports whether name is pattern, or has its prefix when
// pattern ends in *.
func envNameMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// ValidatePassEnv checks names for Config.PassEnv: each must be a
// variable's name, and none may start with CIKIT, the prefix of cikit's
// own configuration (a job gets its CIKIT_* context from the executor).
func ValidatePassEnv(names []string) error {
	for _, n := range names {
		switch {
		case n == "" || strings.ContainsAny(n, "=*\x00"):
			return fmt.Errorf("%q is not a variable name", n)
		case strings.HasPrefix(strings.ToUpper(n), "CIKIT"):
			return fmt.Errorf("%s: CIKIT* variables configure cikit and never pass to jobs", n)
		}
	}
	return nil
}

// baseEnv returns the base environment of cfg's jobs: Config.Env, or the
// host's variables AllowedEnv names, then the host's variables
// Config.PassEnv names.
func baseEnv(cfg *Config) ([]string, error) {
	if err := ValidatePassEnv(cfg.PassEnv); err != nil {
		return nil, fmt.Errorf("process: Config.PassEnv: %w", err)
	}
	if cfg.Env == nil {
		return HostEnv(os.Environ(), cfg.PassEnv), nil
	}
	for _, kv := range cfg.Env {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("process: Config.Env: %q is not NAME=value", kv)
		}
	}
	env := slices.Clone(cfg.Env)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); slices.Contains(cfg.PassEnv, name) {
			env = append(env, kv)
		}
	}
	return env, nil
}
