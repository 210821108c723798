package process

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/compiler/expr"
	"github.com/cikit/cikit/fleet/runtime"
)

// The actions the executor runs itself, with the job's Files, by the
// names expr.BuiltinAction gives them.
const (
	actCache            = "cache"
	actCacheRestore     = "cache/restore"
	actCacheSave        = "cache/save"
	actUploadArtifact   = "upload-artifact"
	actDownloadArtifact = "download-artifact"
)

// builtinAction returns which of the built-in actions uses names
// (expr.BuiltinAction); "" for another.
func builtinAction(uses string) string {
	name, _ := expr.BuiltinAction(uses)
	return name
}

// errStepInput marks a step whose inputs are wrong: the job's
// configuration.
var errStepInput = errors.New("bad input")

// runBuiltin runs a built-in action's step and returns its outputs. An
// error is the step's failure, of the class returned.
func (j *jobRun) runBuiltin(ctx context.Context, step cikit.Step, name, action string) (map[string]string, cikit.FailureClass, error) {
	if j.job.Files == nil {
		return nil, cikit.FailureInfrastructure, errNoFiles
	}
	// Input names ignore case, as GitHub's do: the steps read them
	// lower-case.
	honoured := expr.BuiltinInputs(action)
	with := make(map[string]string, len(step.With))
	for _, k := range slices.Sorted(maps.Keys(step.With)) {
		lk := strings.ToLower(k)
		if !slices.Contains(honoured, lk) {
			fmt.Fprintf(j.pw, "--- warning: actions/%s input %q is not used: this runner does not honour it\n", action, k)
		}
		with[lk] = step.With[k]
	}
	step.With = with
	var (
		out map[string]string
		err error
	)
	switch action {
	case actCache, actCacheRestore:
		out, err = j.cacheStep(ctx, step, name, action == actCache)
	case actCacheSave:
		out, err = nil, j.cacheSaveStep(ctx, step, name)
	case actUploadArtifact:
		out, err = j.uploadArtifactStep(ctx, step)
	case actDownloadArtifact:
		out, err = j.downloadArtifactStep(ctx, step)
	}
	if err == nil {
		return out, "", nil
	}
	class := cikit.FailureScript
	var te *transferError
	switch {
	case errors.Is(err, errStepInput):
		class = cikit.FailureConfig
	case errors.As(err, &te) && !errors.Is(err, artifacts.ErrRefused) && !errors.Is(err, artifacts.ErrUnsafeArchive):
		class = cikit.FailureInfrastructure
	}
	return out, class, fmt.Errorf("actions/%s: %w", action, err)
}

// inputBool reads a boolean input, false when unset.
func inputBool(with map[string]string, name string) (bool, error) {
	v := strings.TrimSpace(with[name])
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s must be true or false, got %q", errStepInput, name, v)
	}
	return b, nil
}

// lines splits a multi-line input into its non-empty lines, trimmed.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// resolvePath resolves a path an action's input names, absolute, which
// must lie in the job's root: a relative one is in the workspace, and
// "~" is the job's HOME (env's).
func (j *jobRun) resolvePath(p string, env map[string]string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home := env["HOME"]
		if home == "" || !filepath.IsAbs(home) {
			return "", fmt.Errorf("%w: path %q: the job has no HOME to expand ~ to", errStepInput, p)
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(j.ws, p)
	}
	p = filepath.Clean(p)
	if !within(p, j.root) {
		return "", fmt.Errorf("%w: path %q is outside the job's directory: a path must be in the workspace %s or RUNNER_TEMP %s (the job's HOME is %s)", errStepInput, p, j.ws, j.temp, env["HOME"])
	}
	return p, nil
}

// stepVars returns the environment a step of the job sees, as a map.
func (j *jobRun) stepVars(step cikit.Step) map[string]string {
	env := map[string]string{}
	for _, kv := range j.stepEnv(step.Env, nil) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// cachePaths resolves actions/cache's path input into globs relative
// to the job's root ("!" ones excluded).
func (j *jobRun) cachePaths(step cikit.Step) ([]string, error) {
	env := j.stepVars(step)
	var out []string
	for _, p := range lines(step.With["path"]) {
		neg := strings.HasPrefix(p, "!")
		abs, err := j.resolvePath(strings.TrimPrefix(p, "!"), env)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(j.root, abs)
		rel = filepath.ToSlash(rel)
		if neg {
			rel = "!" + rel
		}
		out = append(out, rel)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: input path is required: the paths to cache, one a line", errStepInput)
	}
	return out, nil
}

// cacheKeyInput reads and checks the key input.
func cacheKeyInput(with map[string]string) (string, error) {
	key := strings.TrimSpace(with["key"])
	switch {
	case key == "":
		return "", fmt.Errorf("%w: input key is required", errStepInput)
	case len(key) > artifacts.MaxNameLen:
		return "", fmt.Errorf("%w: key is %d bytes long; at most %d are allowed", errStepInput, len(key), artifacts.MaxNameLen)
	case strings.Contains(key, ","):
		return "", fmt.Errorf("%w: key %q must not contain commas", errStepInput, key)
	}
	return key, nil
}

// newActionCache builds the cache of an actions/cache step.
func (j *jobRun) newActionCache(step cikit.Step, name string) (*cacheRun, error) {
	key, err := cacheKeyInput(step.With)
	if err != nil {
		return nil, err
	}
	paths, err := j.cachePaths(step)
	if err != nil {
		return nil, err
	}
	var includes, excludes []string
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(p, "!"); ok {
			excludes = append(excludes, rest)
		} else {
			includes = append(includes, p)
		}
	}
	restore := lines(step.With["restore-keys"])
	if len(restore) > artifacts.MaxRestoreKeys {
		return nil, fmt.Errorf("%w: %d restore-keys; at most %d are allowed", errStepInput, len(restore), artifacts.MaxRestoreKeys)
	}
	return &cacheRun{
		rep:     cikit.CacheReport{Step: name, Key: key},
		keys:    runtime.CacheKeys{Key: key, RestoreKeys: restore, Policy: runtime.CachePullPush, When: string(cikit.WhenOnSuccess)},
		root:    j.root,
		paths:   includes,
		exclude: excludes,
	}, nil
}

// cacheStep runs actions/cache (save, set: its cache is saved at the
// job's end) or actions/cache/restore.
func (j *jobRun) cacheStep(ctx context.Context, step cikit.Step, name string, save bool) (map[string]string, error) {
	cr, err := j.newActionCache(step, name)
	if err != nil {
		return nil, err
	}
	lookupOnly, err := inputBool(step.With, "lookup-only")
	if err != nil {
		return nil, err
	}
	failOnMiss, err := inputBool(step.With, "fail-on-cache-miss")
	if err != nil {
		return nil, err
	}
	always, err := inputBool(step.With, "save-always")
	if err != nil {
		return nil, err
	}
	if always {
		cr.keys.When = string(cikit.WhenAlways)
	}
	if !save {
		cr.restoreOnly = true
	}
	j.caches = append(j.caches, cr)
	hit := j.restoreCache(ctx, cr, !lookupOnly)
	out := map[string]string{"cache-hit": strconv.FormatBool(cr.rep.Exact)}
	if !save {
		out["cache-primary-key"] = cr.keys.Key
		out["cache-matched-key"] = cr.rep.MatchedKey
	}
	if !hit && failOnMiss {
		return out, fmt.Errorf("no cache entry was restored for key %q or its restore keys, and fail-on-cache-miss is set", cr.keys.Key)
	}
	return out, nil
}

// cacheSaveStep runs actions/cache/save: it saves now.
func (j *jobRun) cacheSaveStep(ctx context.Context, step cikit.Step, name string) error {
	cr, err := j.newActionCache(step, name)
	if err != nil {
		return err
	}
	j.caches = append(j.caches, cr)
	j.saveCache(ctx, cr)
	cr.restoreOnly = true // saved: nothing more at the job's end
	return nil
}

// uploadArtifactStep runs actions/upload-artifact.
func (j *jobRun) uploadArtifactStep(ctx context.Context, step cikit.Step) (map[string]string, error) {
	with := step.With
	name := cmp.Or(strings.TrimSpace(with["name"]), "artifact")
	ifNone := cmp.Or(strings.TrimSpace(with["if-no-files-found"]), "warn")
	if !slices.Contains([]string{"warn", "error", "ignore"}, ifNone) {
		return nil, fmt.Errorf("%w: if-no-files-found must be warn, error or ignore, got %q", errStepInput, ifNone)
	}
	var expire time.Duration
	if v := strings.TrimSpace(with["retention-days"]); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 0 {
			return nil, fmt.Errorf("%w: retention-days must be a number of days, got %q", errStepInput, v)
		}
		expire = time.Duration(days) * 24 * time.Hour
	}
	overwrite, err := inputBool(with, "overwrite")
	if err != nil {
		return nil, err
	}
	hidden, err := inputBool(with, "include-hidden-files")
	if err != nil {
		return nil, err
	}
	env := j.stepVars(step)
	var includes, excludes []string
	for _, p := range lines(with["path"]) {
		neg := strings.HasPrefix(p, "!")
		abs, err := j.resolvePath(strings.TrimPrefix(p, "!"), env)
		if err != nil {
			return nil, err
		}
		if neg {
			excludes = append(excludes, abs)
		} else {
			includes = append(includes, abs)
		}
	}
	if len(includes) == 0 {
		return nil, fmt.Errorf("%w: input path is required: the files to upload, one a line", errStepInput)
	}
	root := archiveRoot(includes)
	opts := artifacts.PackOptions{Root: root}
	for _, p := range includes {
		rel, _ := filepath.Rel(root, p)
		opts.Paths = append(opts.Paths, filepath.ToSlash(rel))
	}
	for _, p := range excludes {
		if rel, err := filepath.Rel(root, p); err == nil && within(p, root) {
			opts.Exclude = append(opts.Exclude, filepath.ToSlash(rel))
		}
	}
	if !hidden {
		opts.Exclude = append(opts.Exclude, ".*", ".*/**", "**/.*", "**/.*/**")
	}
	started := time.Now()
	p, err := j.pack(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer p.close()
	if p.stats.Files == 0 && p.stats.Symlinks == 0 {
		msg := fmt.Sprintf("no files were found with the provided path: %s", strings.Join(lines(with["path"]), ", "))
		switch ifNone {
		case "error":
			return nil, errors.New(msg + "; no artifacts will be uploaded")
		case "warn":
			fmt.Fprintf(j.pw, "--- warning: upload-artifact: %s; no artifacts will be uploaded\n", msg)
		default:
			fmt.Fprintf(j.pw, "--- upload-artifact: %s; no artifacts will be uploaded\n", msg)
		}
		return nil, nil
	}
	a, err := j.upload(ctx, p, artifacts.UploadRequest{Name: name, Type: artifacts.TypeArchive, ExpireIn: expire, Overwrite: overwrite})
	if err != nil {
		return nil, fmt.Errorf("artifact %q (%s, %s): %w", name, files(p.stats.Files), sizeString(p.size), err)
	}
	fmt.Fprintf(j.pw, "--- upload-artifact: %q (%s, %s, sha256 %s) uploaded in %s\n", name, files(p.stats.Files), sizeString(p.size), short(p.sha256), time.Since(started).Round(time.Millisecond))
	return map[string]string{"artifact-id": a.ID, "artifact-digest": p.sha256}, nil
}

// archiveRoot is the directory upload-artifact archives paths relative
// to, GitHub's rule: the least common ancestor of the paths' search
// paths (each path up to its first segment with a wildcard); the parent
// of a search path that is a file.
func archiveRoot(paths []string) string {
	var search []string
	for _, p := range paths {
		segs := strings.Split(filepath.ToSlash(p), "/")
		for i, s := range segs {
			if strings.ContainsAny(s, "*?[") {
				segs = segs[:i]
				break
			}
		}
		search = append(search, filepath.FromSlash(path.Clean("/"+strings.Join(segs, "/"))))
	}
	root := search[0]
	for _, s := range search[1:] {
		for !within(s, root) {
			root = filepath.Dir(root)
		}
	}
	// A file's parent; the nearest directory that exists for a path
	// that does not (which then matches nothing).
	for {
		if fi, err := os.Stat(root); (err == nil && fi.IsDir()) || filepath.Dir(root) == root {
			return root
		}
		root = filepath.Dir(root)
	}
}

// downloadArtifactStep runs actions/download-artifact: the artifacts of
// the job's run.
func (j *jobRun) downloadArtifactStep(ctx context.Context, step cikit.Step) (map[string]string, error) {
	with := step.With
	for _, k := range []string{"github-token", "run-id", "repository"} {
		if strings.TrimSpace(with[k]) != "" {
			return nil, fmt.Errorf("%w: input %s asks for the artifacts of another run or repository; this runner downloads only the artifacts of the job's own run", errStepInput, k)
		}
	}
	merge, err := inputBool(with, "merge-multiple")
	if err != nil {
		return nil, err
	}
	dest := j.ws
	if p := strings.TrimSpace(with["path"]); p != "" {
		if dest, err = j.resolvePath(p, j.stepVars(step)); err != nil {
			return nil, err
		}
	}
	name, pattern := strings.TrimSpace(with["name"]), strings.TrimSpace(with["pattern"])
	if pattern != "" {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("%w: pattern %q: %v", errStepInput, pattern, err)
		}
	}
	list, err := j.job.Files.ListArtifacts(ctx, artifacts.ListRequest{Name: name, Type: artifacts.TypeArchive})
	if err != nil {
		return nil, &transferError{"listing the run's artifacts", err}
	}
	if name != "" && len(list) == 0 {
		return nil, fmt.Errorf("artifact %q not found in the run", name)
	}
	for _, a := range list {
		if pattern != "" && name == "" {
			if ok, _ := path.Match(pattern, a.Name); !ok {
				continue
			}
		}
		into := dest
		if name == "" && !merge {
			into = filepath.Join(dest, a.Name)
			if !within(into, dest) || a.Name == "" || a.Name == "." {
				return nil, fmt.Errorf("artifact %q: its name is no directory name", a.Name)
			}
		}
		if err := j.mkdirOwned(into); err != nil {
			return nil, &transferError{"creating " + into, err}
		}
		if a.Download == nil {
			return nil, &transferError{fmt.Sprintf("artifact %q", a.Name), errors.New("the artifact store gave no download")}
		}
		got, err := j.fetch(ctx, *a.Download, a.Size, a.SHA256, into)
		if err != nil {
			return nil, fmt.Errorf("artifact %q of %s (%s, sha256 %s): %w", a.Name, a.JobID, sizeString(a.Size), a.SHA256, err)
		}
		fmt.Fprintf(j.pw, "--- download-artifact: %q of %s (%s, %s, sha256 %s) downloaded in %s\n",
			a.Name, a.JobID, files(got.stats.Files), sizeString(a.Size), short(a.SHA256), got.took.Round(time.Millisecond))
	}
	return map[string]string{"download-path": dest}, nil
}

// mkdirOwned creates dir and its missing parents inside the job's root,
// given to the job's user.
func (j *jobRun) mkdirOwned(dir string) error {
	var missing []string
	for d := dir; within(d, j.root) && d != j.root; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for _, d := range slices.Backward(missing) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := j.e.own(d); err != nil {
			return err
		}
	}
	return nil
}
