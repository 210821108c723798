package runtime

import (
	"fmt"
	"strings"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/compiler/expr"
)

// Cache policies and outcomes (cikit.Cache.Policy and When).
const (
	CachePullPush = "pull-push"
	CachePull     = "pull"
	CachePush     = "push"
)

// CacheKeys is a cache of a job with its keys rendered for the run:
// what the runner looks up and saves.
type CacheKeys struct {
	// Key is the key looked up and saved under.
	Key string
	// FallbackKeys are exact keys tried when Key misses; RestoreKeys the
	// prefixes tried after them.
	FallbackKeys []string
	RestoreKeys  []string
	// Policy is CachePullPush, CachePull or CachePush; When "on_success",
	// "on_failure" or "always".
	Policy string
	When   string
}

// Pulls reports whether the cache is restored before the steps.
func (k CacheKeys) Pulls() bool { return k.Policy != CachePush }

// Pushes reports whether the cache is saved after the steps.
func (k CacheKeys) Pushes() bool { return k.Policy != CachePull }

// RenderCache renders the keys of cache c of a job of the given format
// (cikit.JobSpec.Format) whose workspace is workspace and whose
// environment is env:
//
//   - a GitLab job's key, fallback keys, restore keys, key prefix and
//     policy have their variables expanded from env ($NAME, ${NAME}, as
//     GitLabEnv does); CACHE_FALLBACK_KEY, when env sets it, is the last
//     fallback key, as in GitLab;
//   - other jobs' keys and restore keys have their {{ hash("glob", …) }}
//     placeholders replaced by HashFiles of the globs (expr.RenderCacheKey);
//   - KeyFiles make the key "{prefix}-{hash}" (the hash alone without a
//     prefix), the hash being HashFiles of the files; "{prefix}-default"
//     or "default" when none of them exists, as GitLab falls back;
//   - an empty key is "default".
//
// A key that is still empty, longer than 512 bytes, or holds a "/" or a
// NUL is an error, as is a policy or when that is not one of the known
// values.
func RenderCache(format string, c cikit.Cache, workspace string, env map[string]string) (CacheKeys, error) {
	gitlab := format == "gitlab"
	lookup := func(name string) string { return env[name] }
	expand := func(s string) (string, error) {
		if gitlab {
			return expandGitLab(s, lookup), nil
		}
		return expr.RenderCacheKey(s, func(globs []string) (string, error) { return HashFiles(workspace, globs) })
	}
	k := CacheKeys{Policy: c.Policy, When: c.When}
	var err error
	if gitlab {
		k.Policy = expandGitLab(k.Policy, lookup)
	}
	switch k.Policy {
	case "":
		k.Policy = CachePullPush
	case CachePullPush, CachePull, CachePush:
	default:
		return k, fmt.Errorf("cache policy %q: want %s, %s or %s", k.Policy, CachePullPush, CachePull, CachePush)
	}
	switch k.When {
	case "":
		k.When = string(cikit.WhenOnSuccess)
	case string(cikit.WhenOnSuccess), string(cikit.WhenOnFailure), string(cikit.WhenAlways):
	default:
		return k, fmt.Errorf("cache when %q: want on_success, on_failure or always", k.When)
	}
	if len(c.KeyFiles) > 0 {
		prefix, err := expand(c.KeyPrefix)
		if err != nil {
			return k, fmt.Errorf("cache key prefix: %w", err)
		}
		sum, err := HashFiles(workspace, c.KeyFiles)
		if err != nil {
			return k, fmt.Errorf("cache key files: %w", err)
		}
		k.Key = sum
		if sum == "" {
			k.Key = "default"
		}
		if prefix != "" {
			k.Key = prefix + "-" + k.Key
		}
	} else if k.Key, err = expand(c.Key); err != nil {
		return k, fmt.Errorf("cache key %q: %w", c.Key, err)
	}
	if c.Key == "" && len(c.KeyFiles) == 0 {
		k.Key = "default"
	}
	if err := checkCacheKey(k.Key); err != nil {
		return k, fmt.Errorf("cache key %q: %w", k.Key, err)
	}
	for _, f := range c.FallbackKeys {
		x, err := expand(f)
		if err != nil {
			return k, fmt.Errorf("cache fallback key %q: %w", f, err)
		}
		if x != "" && x != k.Key {
			k.FallbackKeys = append(k.FallbackKeys, x)
		}
	}
	if fb := env["CACHE_FALLBACK_KEY"]; gitlab && fb != "" && fb != k.Key {
		k.FallbackKeys = append(k.FallbackKeys, fb)
	}
	for _, r := range c.RestoreKeys {
		x, err := expand(r)
		if err != nil {
			return k, fmt.Errorf("cache restore key %q: %w", r, err)
		}
		if x != "" {
			k.RestoreKeys = append(k.RestoreKeys, x)
		}
	}
	for _, x := range append(append([]string(nil), k.FallbackKeys...), k.RestoreKeys...) {
		if err := checkCacheKey(x); err != nil {
			return k, fmt.Errorf("cache key %q: %w", x, err)
		}
	}
	if n := len(k.FallbackKeys) + len(k.RestoreKeys); n > artifacts.MaxRestoreKeys {
		return k, fmt.Errorf("the cache has %d fallback and restore keys; at most %d are allowed", n, artifacts.MaxRestoreKeys)
	}
	return k, nil
}

// checkCacheKey says what is wrong with a rendered key.
func checkCacheKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("the key is empty once rendered")
	case len(key) > artifacts.MaxNameLen:
		return fmt.Errorf("the key is %d bytes long; at most %d are allowed", len(key), artifacts.MaxNameLen)
	case strings.ContainsAny(key, "/\x00"), key == "." || key == "..":
		return fmt.Errorf(`a key must not hold "/" or NUL, nor be "." or ".."`)
	}
	return nil
}
