package config

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// EnvConfig names the environment variable that gives the config file
// when -config does not.
const EnvConfig = "CIKIT_CONFIG"

// Setting is one leaf of Config: its dotted name, help text and value.
type Setting struct {
	// Name is the setting's path in the YAML file, such as postgres.url;
	// it is also the flag's name.
	Name string
	// Env is its environment variable, such as CIKIT_POSTGRES_URL.
	Env   string
	Usage string
	field reflect.Value
}

// Settings lists c's settings in the order of the struct.
func (c *Config) Settings() []Setting {
	var out []Setting
	walk(reflect.ValueOf(c).Elem(), "", &out)
	return out
}

func walk(v reflect.Value, prefix string, out *[]Setting) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" || f.Tag.Get("config") == "file-only" {
			continue
		}
		path := prefix + name
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Duration]() {
			walk(v.Field(i), path+".", out)
			continue
		}
		*out = append(*out, Setting{Name: path, Env: envName(path), Usage: f.Tag.Get("usage"), field: v.Field(i)})
	}
}

// Set parses s into the setting.
func (s Setting) Set(value string) error {
	f := s.field
	switch f.Interface().(type) {
	case string:
		f.SetString(value)
	case bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean", s.Name, value)
		}
		f.SetBool(b)
	case int, int64:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", s.Name, value)
		}
		f.SetInt(n)
	case time.Duration:
		d, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration such as 30s", s.Name, value)
		}
		f.SetInt(int64(d))
	case []string:
		var list []string
		for _, p := range strings.Split(value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				list = append(list, p)
			}
		}
		f.Set(reflect.ValueOf(list))
	default:
		return fmt.Errorf("%s: unsupported setting type %s", s.Name, f.Type())
	}
	return nil
}

// String returns the setting's value as text, lists comma-separated, as
// Set reads it. It shows secrets too; the flags' help does not.
func (s Setting) String() string {
	switch v := s.field.Interface().(type) {
	case []string:
		return strings.Join(v, ",")
	default:
		return fmt.Sprint(v)
	}
}

// secret reports whether a setting holds a secret, whose value help texts
// do not show.
func (s Setting) secret() bool {
	leaf := s.Name[strings.LastIndexByte(s.Name, '.')+1:]
	return strings.Contains(leaf, "token") && leaf != "token-ttl" && leaf != "token-max-ttl" || strings.Contains(leaf, "secret") || strings.HasSuffix(leaf, "-keys") || leaf == "keys" ||
		slices.Contains([]string{"s3.access-key-id", "postgres.url", "redis.url", "secrets.postgres-roles.admin-url", "secrets.postgres-roles.url"}, s.Name)
}

// Loader reads a Config from a file, the environment and flags.
type Loader struct {
	cfg     *Config
	file    *string
	flagged []flagValue
}

type flagValue struct {
	s     Setting
	value string
}

// NewLoader registers -config and a flag for every setting on fs. After
// fs.Parse, Load builds the Config. A boolean setting's flag needs no
// value: -postgres.migrate is -postgres.migrate=true.
func NewLoader(fs *flag.FlagSet) *Loader {
	return newLoader(fs, Default())
}

// newLoader is NewLoader over the defaults in cfg.
func newLoader(fs *flag.FlagSet, cfg *Config) *Loader {
	l := &Loader{cfg: cfg}
	l.file = fs.String("config", "", "the YAML config file (default: $"+EnvConfig+")")
	for _, s := range l.cfg.Settings() {
		def := s.String()
		if s.secret() {
			def = ""
		}
		usage := s.Usage + " [$" + s.Env + "]"
		if def != "" && def != "0" && def != "false" {
			usage += " (default " + def + ")"
		}
		set := func(v string) error {
			l.flagged = append(l.flagged, flagValue{s, v})
			return nil
		}
		if _, ok := s.field.Interface().(bool); ok {
			fs.BoolFunc(s.Name, usage, set)
		} else {
			fs.Func(s.Name, usage, set)
		}
	}
	return l
}

// Load applies, over the defaults, the config file, then environ's CIKIT_*
// variables, then the flags fs parsed, and validates the result. It
// returns warnings for CIKIT_* variables that name no setting (jobs and
// runners set some of their own, so they are not errors).
func (l *Loader) Load(environ []string) (*Config, []string, error) {
	return l.LoadChecked(environ, (*Config).Validate)
}

// LoadChecked is Load with the result checked by check instead of
// Validate: for commands that use only part of the configuration, such
// as `cikit migrate`, which needs only postgres.url.
func (l *Loader) LoadChecked(environ []string, check func(*Config) error) (*Config, []string, error) {
	cfg := l.cfg
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CIKIT_") {
			env[k] = v
		}
	}
	path := *l.file
	if path == "" {
		path = env[EnvConfig]
	}
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("config: %w", err)
		}
		err = cfg.DecodeYAML(f)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	byEnv := map[string]Setting{}
	for _, s := range cfg.Settings() {
		byEnv[s.Env] = s
	}
	var warnings []string
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s, ok := byEnv[k]
		switch {
		case ok:
			if err := s.Set(env[k]); err != nil {
				return nil, nil, fmt.Errorf("config: $%s: %w", k, err)
			}
		case k != EnvConfig && !strings.HasPrefix(k, "CIKIT_TEST_"):
			warnings = append(warnings, fmt.Sprintf("$%s names no setting; ignored", k))
		}
	}
	for _, fv := range l.flagged {
		if err := fv.s.Set(fv.value); err != nil {
			return nil, nil, fmt.Errorf("config: -%w", err)
		}
	}
	if err := check(cfg); err != nil {
		return nil, nil, err
	}
	return cfg, warnings, nil
}
