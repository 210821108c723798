package process_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
	"github.com/cikit/cikit/fleet/process"
	"github.com/cikit/cikit/internal/syncbuf"
)

// files is an artifact store as the platform runs it: a Service over a
// memory manifest and cache index and a SignedFileStore served over
// HTTP, whose blobs are in dir.
type files struct {
	svc    *artifacts.Service
	index  *artifacts.MemoryCacheIndex
	dir    string
	client *http.Client
}

func newFiles(t testing.TB) *files {
	t.Helper()
	dir := t.TempDir()
	fstore, err := artifacts.NewFileStore(dir)
	require.NoError(t, err)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	signed, err := artifacts.NewSignedFileStore(fstore, bytes.Repeat([]byte("k"), 32), srv.URL+"/v1/blobs")
	require.NoError(t, err)
	mux.Handle("/v1/blobs/", signed.Handler())
	index := artifacts.NewMemoryCacheIndex()
	svc, err := artifacts.NewService(artifacts.ServiceConfig{Blobs: signed, Manifest: artifacts.NewMemoryManifest(), Index: index})
	require.NoError(t, err)
	return &files{svc: svc, index: index, dir: dir, client: srv.Client()}
}

// transfer makes an executor send its archives through f's server.
func (f *files) transfer(c *process.Config) { c.Transfer = artifacts.Sender{HTTP: f.client} }

// runCtx is the context of the jobs of run-1 of acme/app.
func runCtx(needs map[string]cikit.NeedResult) *cikit.JobContext {
	jc := noRun()
	jc.Repository, jc.RefType, jc.RefName, jc.Ref, jc.DefaultBranch = "acme/app", "branch", "main", "refs/heads/main", "main"
	jc.Needs = needs
	return jc
}

// run runs spec in run-1 with f as its Files and returns its result and
// output.
func (f *files) run(t testing.TB, b *bundle, spec *cikit.JobSpec, needs map[string]cikit.NeedResult) (process.Result, string) {
	t.Helper()
	jc := runCtx(needs)
	out := &syncbuf.Buffer{}
	broker := f.svc.ForJob(artifacts.JobRefFor(&jc.RunContext, jc.RunID, spec, jc.Attempt))
	res := b.exec.RunJob(context.Background(), process.Job{Spec: spec, Context: jc, Output: out, Files: broker})
	return res, out.String()
}

// artifactsOf returns the run's artifacts by job and name.
func (f *files) artifactsOf(t *testing.T) map[string]artifacts.Artifact {
	t.Helper()
	list, err := f.svc.RunArtifacts(context.Background(), "run-1")
	require.NoError(t, err)
	out := map[string]artifacts.Artifact{}
	for _, a := range list {
		out[a.JobID+"/"+a.Name] = a
	}
	return out
}

var succeeded = cikit.NeedResult{Result: cikit.JobSucceeded}

// TestArtifactsAlongTheDAG: a native job's artifacts reach the jobs that
// need it, byte for byte, before their first step; a job that needs it
// with needs:artifacts:false gets nothing.
func TestArtifactsAlongTheDAG(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		f := newFiles(t)
		b := setup(t, mode, f.transfer)
		bin := make([]byte, 200<<10)
		_, _ = rand.Read(bin)
		require.NoError(t, os.WriteFile(filepath.Join(b.src, "app.bin"), bin, 0o755))
		sum := sha256.Sum256(bin)
		want := hex.EncodeToString(sum[:])

		res, out := f.run(t, b, &cikit.JobSpec{ID: "build", Format: "native",
			Steps:     steps("mkdir -p bin/sub && cp app.bin bin/app && echo note > bin/sub/note.txt && echo scratch > scratch.txt"),
			Artifacts: &cikit.Artifacts{Paths: []string{"bin/"}, Exclude: []string{"**/*.txt"}, ExpireNever: true},
		}, nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Regexp(t, `--- artifacts: "artifacts" \(1 file, [0-9.]+ KiB, sha256 [0-9a-f]{12}…\) uploaded in`, out)
		a, ok := f.artifactsOf(t)["build/artifacts"]
		require.True(t, ok)
		require.True(t, a.ExpiresAt.IsZero(), "expire_in: never")
		require.Equal(t, 1, a.Files)

		res, out = f.run(t, b, &cikit.JobSpec{ID: "test", Format: "native", Needs: []string{"build"},
			Steps: steps(`sha256sum bin/app | cut -d' ' -f1; test -x bin/app; test ! -e bin/sub/note.txt; test ! -e scratch.txt; rm bin/app`),
		}, map[string]cikit.NeedResult{"build": succeeded})
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), want+"\n")
		require.Regexp(t, `--- artifacts: build's "artifacts" \(1 file, [0-9.]+ KiB, sha256 [0-9a-f]{12}…\) downloaded in \d`, out)

		res, out = f.run(t, b, &cikit.JobSpec{ID: "lint", Format: "native", Needs: []string{"build"}, NoArtifactsFrom: []string{"build"},
			Steps: steps("test ! -e bin/app && echo nothing"),
		}, map[string]cikit.NeedResult{"build": succeeded})
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.NotContains(t, out, "--- artifacts:")
	})
}

// TestArtifactsWhen: artifacts:when decides for a failed job; a failed
// job's default artifacts are not uploaded, and no files matched is a
// warning.
func TestArtifactsWhen(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	for _, tc := range []struct {
		id, when, script string
		uploaded         bool
		state            cikit.JobState
		log              string
	}{
		{id: "fails-on-failure", when: "on_failure", script: "echo log > out.log; exit 1", uploaded: true, state: cikit.JobFailed},
		{id: "fails-default", script: "echo log > out.log; exit 1", state: cikit.JobFailed, log: "--- artifacts: not uploaded: artifacts:when is on_success and the job failed"},
		{id: "passes-on-failure", when: "on_failure", script: "echo log > out.log", state: cikit.JobSucceeded, log: "not uploaded: artifacts:when is on_failure"},
		{id: "passes-always", when: "always", script: "echo log > out.log", uploaded: true, state: cikit.JobSucceeded},
		{id: "nothing", script: "true", state: cikit.JobSucceeded, log: `--- warning: artifacts "nothing": no files matched out.log; nothing uploaded`},
	} {
		res, out := f.run(t, b, &cikit.JobSpec{ID: tc.id, Format: "gitlab", Steps: steps(tc.script),
			Artifacts: &cikit.Artifacts{Name: tc.id, Paths: []string{"out.log"}, When: tc.when}}, nil)
		require.Equal(t, tc.state, res.State, out)
		_, ok := f.artifactsOf(t)[tc.id+"/"+tc.id]
		require.Equal(t, tc.uploaded, ok, "%s: %s", tc.id, out)
		require.Contains(t, out, tc.log, tc.id)
	}
}

// TestDotenvReachesDependents: a GitLab job's dotenv report becomes its
// outputs, which a job that needs it gets as variables above its own;
// other reports are uploaded as such; a bad dotenv file is a warning.
func TestDotenvReachesDependents(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	res, out := f.run(t, b, &cikit.JobSpec{ID: "build", Format: "gitlab",
		Steps:     steps(`printf 'VERSION=1.2.3\nURL = https://x.example/a=b\n' > build.env; echo '<testsuite/>' > junit.xml`),
		Artifacts: &cikit.Artifacts{Reports: map[string][]string{"dotenv": {"build.env"}, "junit": {"junit.xml"}}},
	}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Equal(t, map[string]string{"VERSION": "1.2.3", "URL": "https://x.example/a=b"}, res.Outputs)
	rep, ok := f.artifactsOf(t)["build/report-junit"]
	require.True(t, ok, out)
	require.Equal(t, artifacts.TypeReport, rep.Type)
	require.Equal(t, "junit", rep.Report)

	res, out = f.run(t, b, &cikit.JobSpec{ID: "deploy", Format: "gitlab", Needs: []string{"build"},
		Env:   map[string]string{"VERSION": "from-yaml", "IMAGE": "app:$VERSION"},
		Steps: steps(`echo "version=$VERSION image=$IMAGE url=$URL"`),
	}, map[string]cikit.NeedResult{"build": {Result: cikit.JobSucceeded, Outputs: res.Outputs}})
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, printed(out), "version=1.2.3 image=app:1.2.3 url=https://x.example/a=b\n")

	res, out = f.run(t, b, &cikit.JobSpec{ID: "bad", Format: "gitlab",
		Steps:     steps(`printf 'A=1\n\nB=2\n' > build.env`),
		Artifacts: &cikit.Artifacts{Reports: map[string][]string{"dotenv": {"build.env"}}},
	}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Nil(t, res.Outputs)
	require.Contains(t, out, "--- warning: dotenv report build.env: line 2: want NAME=VALUE")
}

// TestCaches: a native cache misses and is saved; the next run hits it
// exactly and saves nothing; a changed lock file restores the entry of a
// restore key and saves a new one; policy pull saves nothing.
func TestCaches(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		f := newFiles(t)
		b := setup(t, mode, f.transfer)
		lock := filepath.Join(b.src, "deps.lock")
		job := func(policy string) *cikit.JobSpec {
			return &cikit.JobSpec{ID: "test", Format: "native",
				Steps:  steps(`if test -f vendor/lib; then echo "cached $(cat vendor/lib)"; else echo fresh; fi; mkdir -p vendor; cat deps.lock > vendor/lib`),
				Caches: []cikit.Cache{{Key: `deps-{{ hash("deps.lock") }}`, RestoreKeys: []string{"deps-"}, Paths: []string{"vendor"}, Policy: policy}},
			}
		}
		require.NoError(t, os.WriteFile(lock, []byte("v1\n"), 0o644))
		res, out := f.run(t, b, job(""), nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "fresh\n")
		require.Len(t, res.Caches, 1)
		c := res.Caches[0]
		require.Regexp(t, `^deps-[0-9a-f]{64}$`, c.Key)
		require.False(t, c.Hit)
		require.True(t, c.Saved, out)
		require.Positive(t, c.SavedSize)
		first := c.Key

		res, out = f.run(t, b, job(""), nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "cached v1\n")
		c = res.Caches[0]
		require.True(t, c.Hit && c.Exact, out)
		require.Equal(t, first, c.MatchedKey)
		require.False(t, c.Saved)
		require.Equal(t, "exact hit", c.Note)

		require.NoError(t, os.WriteFile(lock, []byte("v2\n"), 0o644))
		res, out = f.run(t, b, job(""), nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "cached v1\n")
		c = res.Caches[0]
		require.NotEqual(t, first, c.Key)
		require.True(t, c.Hit, out)
		require.False(t, c.Exact)
		require.Equal(t, first, c.MatchedKey)
		require.True(t, c.Saved, out)

		require.NoError(t, os.WriteFile(lock, []byte("v3\n"), 0o644))
		res, out = f.run(t, b, job("pull"), nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		c = res.Caches[0]
		require.True(t, c.Hit, out)
		require.False(t, c.Saved)
		require.Equal(t, "policy pull", c.Note)
		entries, err := f.index.CacheList(context.Background(), "acme/app")
		require.NoError(t, err)
		require.Len(t, entries, 2)
	})
}

// TestGitHubArtifactAndCacheActions: upload-artifact in one GitHub job,
// download-artifact in another; actions/cache misses, is saved at the
// job's end, and hits exactly the next time (cache-hit true).
func TestGitHubArtifactAndCacheActions(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		f := newFiles(t)
		b := setup(t, mode, f.transfer)
		res, out := f.run(t, b, &cikit.JobSpec{ID: "build", Format: "github", Steps: []cikit.Step{
			{Name: "make", Run: "mkdir -p dist/js && echo app > dist/app.txt && echo js > dist/js/a.js && echo secret > dist/.env"},
			{ID: "up", Name: "upload", Uses: "actions/upload-artifact@v4", With: map[string]string{"name": "dist", "path": "dist/\n!dist/js/**", "Retention-Days": "2"}},
			{Name: "ids", Run: `echo "id=${{ steps.up.outputs.artifact-id }} digest=${{ steps.up.outputs.artifact-digest }}"`},
			{Name: "none", Uses: "actions/upload-artifact@v4", With: map[string]string{"name": "none", "path": "nothing/", "if-no-files-found": "warn", "compression-level": "9"}},
		}}, nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		a, ok := f.artifactsOf(t)["build/dist"]
		require.True(t, ok, out)
		require.Contains(t, printed(out), "id="+a.ID+" digest="+a.SHA256+"\n")
		require.Equal(t, 48*time.Hour, a.ExpiresAt.Sub(a.CreatedAt), "retention-days, whose name ignores case")
		require.Contains(t, out, "--- warning: upload-artifact: no files were found with the provided path: nothing/")
		require.Contains(t, out, `--- warning: actions/upload-artifact input "compression-level" is not used`)

		res, out = f.run(t, b, &cikit.JobSpec{ID: "test", Format: "github", Needs: []string{"build"}, Steps: []cikit.Step{
			{ID: "one", Name: "one", Uses: "actions/download-artifact@v4", With: map[string]string{"name": "dist", "path": "got"}},
			{Name: "all", Uses: "actions/download-artifact@v4"},
			{Name: "look", Run: `cat got/app.txt; test ! -e got/js; test ! -e got/.env; cat dist/app.txt; echo "path=${{ steps.one.outputs.download-path }}"`},
		}}, map[string]cikit.NeedResult{"build": succeeded})
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "app\napp\npath=")
		require.Regexp(t, `path=/\S+/workspace/got\n`, printed(out))

		cache := func() *cikit.JobSpec {
			return &cikit.JobSpec{ID: "cached", Format: "github", Steps: []cikit.Step{
				{ID: "c", Name: "cache", Uses: "actions/cache@v4", With: map[string]string{"key": "tools-1", "path": "tools\n${{ runner.temp }}/t"}},
				{Name: "use", Run: `echo "hit=${{ steps.c.outputs.cache-hit }}"; cat tools/bin 2>/dev/null || (mkdir -p tools "$RUNNER_TEMP/t" && echo built > tools/bin && echo t > "$RUNNER_TEMP/t/x")`},
			}}
		}
		res, out = f.run(t, b, cache(), nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "hit=false\n")
		require.Len(t, res.Caches, 1)
		require.Equal(t, "cache", res.Caches[0].Step)
		require.True(t, res.Caches[0].Saved, out)

		res, out = f.run(t, b, cache(), nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "hit=true\nbuilt\n")
		require.Equal(t, "exact hit", res.Caches[0].Note)

		res, out = f.run(t, b, &cikit.JobSpec{ID: "away", Format: "github", Steps: []cikit.Step{
			{Name: "other run", Uses: "actions/download-artifact@v4", With: map[string]string{"run-id": "7"}},
		}}, nil)
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Equal(t, cikit.FailureConfig, res.FailureClass)
		require.Contains(t, res.Reason, "only the artifacts of the job's own run")

		res, out = f.run(t, b, &cikit.JobSpec{ID: "outside", Format: "github", Steps: []cikit.Step{
			{Name: "etc", Uses: "actions/cache@v4", With: map[string]string{"key": "k", "path": "/etc"}},
		}}, nil)
		require.Equal(t, cikit.JobFailed, res.State, out)
		require.Contains(t, res.Reason, `path "/etc" is outside the job's directory`)
	})
}

// TestTamperedArtifactFailsTheJob: an archive whose blob no longer holds
// what was uploaded fails the job that downloads it, saying so.
func TestTamperedArtifactFailsTheJob(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	res, out := f.run(t, b, &cikit.JobSpec{ID: "build", Format: "native", Steps: steps("echo real > out.txt"),
		Artifacts: &cikit.Artifacts{Paths: []string{"out.txt"}}}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	var blobs []string
	require.NoError(t, filepath.WalkDir(f.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			blobs = append(blobs, p)
		}
		return err
	}))
	require.Len(t, blobs, 1)
	st, err := os.Stat(blobs[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(blobs[0], bytes.Repeat([]byte("x"), int(st.Size())), 0o644))

	res, out = f.run(t, b, &cikit.JobSpec{ID: "test", Format: "native", Needs: []string{"build"}, Steps: steps("echo ran")},
		map[string]cikit.NeedResult{"build": succeeded})
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
	require.Contains(t, res.Reason, `artifacts: build's "artifacts"`)
	require.Contains(t, strings.ToLower(res.Reason), "sha-256")
	require.NotContains(t, printed(out), "ran\n")
}

// TestFilesWithoutAStore: a job that declares artifacts or caches, or
// uses their actions, fails on a runner without an artifact store.
func TestFilesWithoutAStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, spec := range []*cikit.JobSpec{
		{ID: "a", Format: "native", Steps: steps("true"), Artifacts: &cikit.Artifacts{Paths: []string{"x"}}},
		{ID: "c", Format: "gitlab", Steps: steps("true"), Caches: []cikit.Cache{{Key: "k", Paths: []string{"x"}}}},
		{ID: "g", Format: "github", Steps: []cikit.Step{{Name: "up", Uses: "actions/upload-artifact@v4", With: map[string]string{"path": "x"}}}},
	} {
		res := b.exec.RunJob(context.Background(), process.Job{Spec: spec, Context: runCtx(nil)})
		require.Equal(t, cikit.JobFailed, res.State, spec.ID)
		require.Equal(t, cikit.FailureInfrastructure, res.FailureClass)
		require.Contains(t, res.Reason, "this runner has no artifact store", spec.ID)
	}
	// Needs alone ask for nothing: there is nothing to list.
	res := b.exec.RunJob(context.Background(), process.Job{Spec: &cikit.JobSpec{ID: "n", Format: "native", Needs: []string{"build"}, Steps: steps("true")}, Context: runCtx(nil)})
	require.Equal(t, cikit.JobSucceeded, res.State)
}

// TestArtifactsUntracked: artifacts:untracked adds the files git neither
// tracks nor ignores.
func TestArtifactsUntracked(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode func(*process.Config)) {
		f := newFiles(t)
		b := setup(t, mode, f.transfer)
		res, out := f.run(t, b, &cikit.JobSpec{ID: "build", Format: "gitlab",
			Steps:     steps("git init -q . && echo '*.log' > .gitignore && git add .gitignore input.txt && echo u > new.txt && echo l > debug.log && mkdir -p dist && echo d > dist/app"),
			Artifacts: &cikit.Artifacts{Paths: []string{"dist"}, Untracked: true},
		}, nil)
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		res, out = f.run(t, b, &cikit.JobSpec{ID: "test", Format: "gitlab", Needs: []string{"build"},
			Steps: steps("rm -f input.txt link.txt; cat new.txt dist/app; test ! -e debug.log; test ! -e input.txt"),
		}, map[string]cikit.NeedResult{"build": succeeded})
		require.Equal(t, cikit.JobSucceeded, res.State, out)
		require.Contains(t, printed(out), "u\nd\n")
	})
}

// TestDownloadArtifactSelection: download-artifact's pattern and
// merge-multiple, and ~ in a path where the job's HOME is inside its
// directory.
func TestDownloadArtifactSelection(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	res, out := f.run(t, b, &cikit.JobSpec{ID: "build", Format: "github",
		Env: map[string]string{"HOME": "${{ github.workspace }}/home"},
		Steps: []cikit.Step{
			{Name: "make", Run: "mkdir -p ~/a ~/b && echo a > ~/a/a.txt && echo b > ~/b/b.txt && echo c > c.txt"},
			{Name: "a", Uses: "actions/upload-artifact@v4", With: map[string]string{"name": "bin-a", "path": "~/a"}},
			{Name: "b", Uses: "actions/upload-artifact@v4", With: map[string]string{"name": "bin-b", "path": "~/b/b.txt"}},
			{Name: "c", Uses: "actions/upload-artifact@v4", With: map[string]string{"name": "other", "path": "c.txt"}},
		}}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	res, out = f.run(t, b, &cikit.JobSpec{ID: "test", Format: "github", Steps: []cikit.Step{
		{Name: "split", Uses: "actions/download-artifact@v4", With: map[string]string{"pattern": "bin-*", "path": "split"}},
		{Name: "merged", Uses: "actions/download-artifact@v4", With: map[string]string{"pattern": "bin-*", "path": "merged", "merge-multiple": "true"}},
		{Name: "look", Run: "cat split/bin-a/a.txt split/bin-b/b.txt merged/a.txt merged/b.txt; test ! -e split/other; test ! -e merged/c.txt"},
	}}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, printed(out), "a\nb\na\nb\n")

	res, out = f.run(t, b, &cikit.JobSpec{ID: "home", Format: "github", Env: map[string]string{"HOME": "/nonexistent"}, Steps: []cikit.Step{
		{Name: "tilde", Uses: "actions/upload-artifact@v4", With: map[string]string{"path": "~/x"}},
	}}, nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.Equal(t, cikit.FailureConfig, res.FailureClass)
	require.Contains(t, res.Reason, `path "/nonexistent/x" is outside the job's directory`)
}

// TestCacheKeysAndRaces: a GitLab cache's key holds the run's variables;
// a key saved first elsewhere is a note, not a failure.
func TestCacheKeysAndRaces(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	gitlab := &cikit.JobSpec{ID: "deps", Format: "gitlab", Steps: steps("mkdir -p .deps && echo d > .deps/d"),
		Caches: []cikit.Cache{{Key: "$CI_COMMIT_REF_SLUG-deps", FallbackKeys: []string{"main-old"}, Paths: []string{".deps"}}}}
	res, out := f.run(t, b, gitlab, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Equal(t, "main-deps", res.Caches[0].Key)
	require.True(t, res.Caches[0].Saved, out)

	res, out = f.run(t, b, &cikit.JobSpec{ID: "race", Format: "github", Steps: []cikit.Step{
		{Name: "restore", Uses: "actions/cache@v4", With: map[string]string{"key": "raced", "path": "x"}},
		{Name: "make", Run: "echo x > x"},
		{Name: "save", Uses: "actions/cache/save@v4", With: map[string]string{"key": "raced", "path": "x"}},
	}}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Len(t, res.Caches, 2)
	require.True(t, res.Caches[1].Saved, out)
	require.False(t, res.Caches[0].Saved)
	require.Equal(t, "saved by another job first", res.Caches[0].Note, out)
}

// TestCachePolicyWhenAndUntracked: GitLab's policy push saves without
// restoring; when on_failure saves only after a failure, and the default
// on_success not after one; untracked caches the files git neither
// tracks nor ignores.
func TestCachePolicyWhenAndUntracked(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	job := func(key, policy, when, script string) *cikit.JobSpec {
		return &cikit.JobSpec{ID: "deps", Format: "gitlab", Steps: steps(script),
			Caches: []cikit.Cache{{Key: key, Paths: []string{"vendor"}, Policy: policy, When: when}}}
	}
	const fill = `if test -f vendor/v; then echo "restored $(cat vendor/v)"; else echo none; fi; mkdir -p vendor; echo "$CI_JOB_ID" > vendor/v`

	res, out := f.run(t, b, job("k", "", "", fill), nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.True(t, res.Caches[0].Saved, out)

	res, out = f.run(t, b, job("k", "push", "", fill), nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, printed(out), "none\n", "policy push does not restore")
	require.False(t, res.Caches[0].Hit)

	res, out = f.run(t, b, job("failing", "", "", "mkdir -p vendor && echo x > vendor/v && exit 3"), nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.False(t, res.Caches[0].Saved, out)
	require.Equal(t, "when on_success and the job failed", res.Caches[0].Note)

	res, out = f.run(t, b, job("failing", "", "on_failure", "mkdir -p vendor && echo x > vendor/v && exit 3"), nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.True(t, res.Caches[0].Saved, "when on_failure saves after a failure: %s", out)

	res, out = f.run(t, b, job("passing", "", "on_failure", "mkdir -p vendor && echo x > vendor/v"), nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.False(t, res.Caches[0].Saved, out)

	res, out = f.run(t, b, job("always", "", "always", "mkdir -p vendor && echo x > vendor/v && exit 3"), nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.True(t, res.Caches[0].Saved, "when always saves after a failure: %s", out)

	untracked := &cikit.JobSpec{ID: "untracked", Format: "gitlab",
		Steps:  steps(`if test -f new.txt; then echo "restored $(cat new.txt)"; test ! -e debug.log; exit 0; fi; git init -q . && echo '*.log' > .gitignore && git add .gitignore && echo fresh > new.txt && echo l > debug.log`),
		Caches: []cikit.Cache{{Key: "u", Untracked: true}}}
	res, out = f.run(t, b, untracked, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.True(t, res.Caches[0].Saved, out)
	// The next job's workspace is a fresh copy: new.txt can only come
	// from the cache.
	res, out = f.run(t, b, untracked, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	require.Contains(t, printed(out), "restored fresh\n")
}

// TestCacheActionInputs: actions/cache's lookup-only finds an entry
// without downloading it, fail-on-cache-miss fails the step on a miss,
// and save-always saves the cache after the job failed.
func TestCacheActionInputs(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	cache := func(with map[string]string, after string) *cikit.JobSpec {
		return &cikit.JobSpec{ID: "c", Format: "github", Steps: []cikit.Step{
			{ID: "c", Name: "cache", Uses: "actions/cache@v4", With: with},
			{Name: "after", Run: after},
		}}
	}
	res, out := f.run(t, b, cache(map[string]string{"key": "tools", "path": "tools", "fail-on-cache-miss": "true"}, "echo never"), nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.Contains(t, out, "fail-on-cache-miss is set")
	require.NotContains(t, printed(out), "never")

	res, out = f.run(t, b, cache(map[string]string{"key": "tools", "path": "tools", "save-always": "true"}, "mkdir -p tools && echo t > tools/t && exit 4"), nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.True(t, res.Caches[0].Saved, "save-always saves after a failure: %s", out)

	res, out = f.run(t, b, cache(map[string]string{"key": "tools", "path": "tools", "lookup-only": "true"},
		`echo "hit=${{ steps.c.outputs.cache-hit }}"; test ! -e tools/t`), nil)
	require.Equal(t, cikit.JobSucceeded, res.State, "lookup-only downloads nothing: %s", out)
	require.Contains(t, printed(out), "hit=true\n")
	require.True(t, res.Caches[0].Hit)
	require.Zero(t, res.Caches[0].RestoredInMS)

	res, out = f.run(t, b, cache(map[string]string{"key": "tools", "path": "tools", "lookup-only": "maybe"}, "true"), nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
}

// TestUploadArtifactInputs: a second upload of a name fails unless
// overwrite is set, and then replaces the first; include-hidden-files
// keeps dot files; if-no-files-found: error fails the step.
func TestUploadArtifactInputs(t *testing.T) {
	t.Parallel()
	f := newFiles(t)
	b := setup(t, f.transfer)
	up := func(with map[string]string) cikit.Step {
		return cikit.Step{Name: "up", Uses: "actions/upload-artifact@v4", With: with}
	}
	res, out := f.run(t, b, &cikit.JobSpec{ID: "a", Format: "github", Steps: []cikit.Step{
		{Name: "make", Run: "mkdir -p d && echo one > d/f && echo hidden > d/.env"},
		up(map[string]string{"name": "x", "path": "d", "include-hidden-files": "true"}),
		{Name: "again", Run: "echo two > d/f"},
		up(map[string]string{"name": "x", "path": "d"}),
	}}, nil)
	require.Equal(t, cikit.JobFailed, res.State, "a second upload of x without overwrite fails: %s", out)
	first := f.artifactsOf(t)["a/x"]
	require.Equal(t, 2, first.Files, "include-hidden-files kept d/.env: %+v", first)

	res, out = f.run(t, b, &cikit.JobSpec{ID: "b", Format: "github", Steps: []cikit.Step{
		{Name: "make", Run: "mkdir -p d && echo three > d/f"},
		up(map[string]string{"name": "x", "path": "d", "overwrite": "true"}),
	}}, nil)
	require.Equal(t, cikit.JobSucceeded, res.State, out)
	arts := f.artifactsOf(t)
	require.NotContains(t, arts, "a/x", "overwrite replaced the first x")
	require.Contains(t, arts, "b/x")
	require.NotEqual(t, first.SHA256, arts["b/x"].SHA256)

	res, out = f.run(t, b, &cikit.JobSpec{ID: "c", Format: "github", Steps: []cikit.Step{
		up(map[string]string{"name": "none", "path": "nothing/", "if-no-files-found": "error"}),
	}}, nil)
	require.Equal(t, cikit.JobFailed, res.State, out)
	require.Contains(t, out, "no files were found with the provided path: nothing/")
}
