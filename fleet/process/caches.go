package process

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"time"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet/runtime"
)

// cacheRun is one cache of a job, restored and later saved: one of
// JobSpec.Caches, or one of an actions/cache step.
type cacheRun struct {
	rep  cikit.CacheReport
	keys runtime.CacheKeys
	// root is the directory paths are relative to and the archive is
	// unpacked into; untracked adds git's untracked files of the
	// workspace.
	root      string
	paths     []string
	exclude   []string
	untracked bool
	// restored is the digest of the entry restored; "" for a miss.
	restored string
	// saved says the cache was saved already; restoreOnly that the job's
	// end saves nothing (actions/cache/restore and actions/cache/save).
	saved       bool
	restoreOnly bool
}

// restoreCaches renders the keys of the job's caches and restores those
// whose policy pulls, after the checkout and the needs' artifacts. A
// cache is an optimisation: whatever fails is a warning, and the job
// goes on without it.
func (j *jobRun) restoreCaches(ctx context.Context) {
	if len(j.spec.Caches) == 0 || j.job.Files == nil {
		return
	}
	env := maps.Clone(j.base)
	maps.Copy(env, j.jobEnv)
	maps.Copy(env, j.overrides)
	for i, c := range j.spec.Caches {
		keys, err := runtime.RenderCache(j.spec.Format, c, j.ws, env)
		if err != nil {
			fmt.Fprintf(j.pw, "--- warning: cache %d: %v; the job goes on without it\n", i+1, err)
			continue
		}
		paths, err := relativePaths(j.ws, c.Paths)
		if err != nil {
			fmt.Fprintf(j.pw, "--- warning: cache %q: %v; the job goes on without it\n", keys.Key, err)
			continue
		}
		cr := &cacheRun{rep: cikit.CacheReport{Key: keys.Key}, keys: keys, root: j.ws, paths: paths, untracked: c.Untracked}
		j.caches = append(j.caches, cr)
		if !keys.Pulls() {
			continue
		}
		j.restoreCache(ctx, cr, true)
	}
}

// relativePaths returns paths (globs) relative to root: relative ones
// as they are, absolute ones inside root made relative. One that leaves
// root is an error.
func relativePaths(root string, paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if filepath.IsAbs(p) {
			rel, err := filepath.Rel(root, filepath.Clean(p))
			if err != nil || !within(filepath.Join(root, rel), root) {
				return nil, fmt.Errorf("path %q is outside the workspace %s", p, root)
			}
			p = rel
		}
		if !within(filepath.Join(root, p), root) {
			return nil, fmt.Errorf("path %q is outside the workspace", p)
		}
		out = append(out, filepath.ToSlash(filepath.Clean(p)))
	}
	return out, nil
}

// restoreCache looks cr up and, when download is set and it hits,
// restores the entry; cr's report says how. It reports whether an
// entry was found. Failures are warnings.
func (j *jobRun) restoreCache(ctx context.Context, cr *cacheRun, download bool) bool {
	k := cr.keys
	hit, err := j.job.Files.LookupCache(ctx, artifacts.CacheQuery{Key: k.Key, FallbackKeys: k.FallbackKeys, RestoreKeys: k.RestoreKeys})
	if err != nil {
		fmt.Fprintf(j.pw, "--- warning: cache %q: looking it up: %v; the job goes on without it\n", k.Key, err)
		return false
	}
	if hit == nil {
		fmt.Fprintf(j.pw, "--- cache %q: miss\n", k.Key)
		return false
	}
	how := "exact hit"
	if !hit.Exact {
		how = fmt.Sprintf("from %q", hit.Key)
	}
	if !download {
		cr.rep.Hit, cr.rep.Exact, cr.rep.MatchedKey = true, hit.Exact, hit.Key
		fmt.Fprintf(j.pw, "--- cache %q: found (%s, %s), not downloaded (lookup only)\n", k.Key, how, sizeString(hit.Size))
		return true
	}
	got, err := j.fetch(ctx, hit.Download, hit.Size, hit.SHA256, cr.root)
	if err != nil {
		fmt.Fprintf(j.pw, "--- warning: cache %q: restoring %q: %v; the job goes on without it\n", k.Key, hit.Key, err)
		return false
	}
	cr.restored = hit.SHA256
	cr.rep.Hit, cr.rep.Exact, cr.rep.MatchedKey = true, hit.Exact, hit.Key
	cr.rep.RestoredInMS, cr.rep.Size = got.took.Milliseconds(), hit.Size
	fmt.Fprintf(j.pw, "--- cache %q: restored (%s; %s, %s) in %s\n", k.Key, how, files(got.stats.Files), sizeString(hit.Size), got.took.Round(time.Millisecond))
	return true
}

// saveCaches saves the job's caches at its end, those whose policy
// pushes and whose when matches the job's outcome (state). Failures are
// warnings: the job's result stands.
func (j *jobRun) saveCaches(ctx context.Context, state cikit.JobState) {
	for _, cr := range j.caches {
		switch {
		case cr.saved || cr.restoreOnly:
			continue
		case !cr.keys.Pushes():
			cr.rep.Note = "policy pull"
		case !whenMatches(cr.keys.When, state):
			cr.rep.Note = fmt.Sprintf("when %s and the job %s", cr.keys.When, state)
		default:
			j.saveCache(ctx, cr)
			continue
		}
		fmt.Fprintf(j.pw, "--- cache %q: not saved: %s\n", cr.keys.Key, cr.rep.Note)
	}
}

// saveCache saves cr under its key, unless it was an exact hit or its
// files are those restored; its report says how it went.
func (j *jobRun) saveCache(ctx context.Context, cr *cacheRun) {
	key := cr.keys.Key
	note := func(format string, args ...any) {
		cr.rep.Note = fmt.Sprintf(format, args...)
		fmt.Fprintf(j.pw, "--- cache %q: not saved: %s\n", key, cr.rep.Note)
	}
	if cr.rep.Exact {
		note("exact hit")
		return
	}
	opts := artifacts.PackOptions{Root: cr.root, Paths: cr.paths, Exclude: cr.exclude}
	if cr.untracked {
		var err error
		if opts.Files, err = untracked(ctx, j.ws); err != nil {
			fmt.Fprintf(j.pw, "--- warning: cache %q: %v\n", key, err)
			cr.rep.Note = "untracked files unknown"
			return
		}
	}
	started := time.Now()
	p, err := j.pack(ctx, opts)
	if err != nil {
		fmt.Fprintf(j.pw, "--- warning: cache %q: not saved: %v\n", key, err)
		cr.rep.Note = err.Error()
		return
	}
	defer p.close()
	switch {
	case p.stats.Files == 0 && p.stats.Symlinks == 0:
		note("no files matched %s", strings.Join(cr.paths, ", "))
		return
	case p.sha256 == cr.restored:
		note("unchanged")
		return
	}
	_, err = j.upload(ctx, p, artifacts.UploadRequest{Name: key, Cache: true})
	switch {
	case errors.Is(err, artifacts.ErrCacheExists):
		note("saved by another job first")
	case err != nil:
		cr.rep.Note = err.Error()
		fmt.Fprintf(j.pw, "--- warning: cache %q: not saved: %v; the job's result stands\n", key, err)
	default:
		cr.saved = true
		cr.rep.Saved, cr.rep.SavedSize = true, p.size
		fmt.Fprintf(j.pw, "--- cache %q: saved (%s, %s) in %s\n", key, files(p.stats.Files), sizeString(p.size), time.Since(started).Round(time.Millisecond))
	}
}

// cacheReports returns the reports of the job's caches.
func (j *jobRun) cacheReports() []cikit.CacheReport {
	if len(j.caches) == 0 {
		return nil
	}
	out := make([]cikit.CacheReport, len(j.caches))
	for i, cr := range j.caches {
		out[i] = cr.rep
	}
	return out
}
