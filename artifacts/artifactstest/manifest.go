package artifactstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// ManifestFactory returns a new, empty manifest. Each call must return a
// manifest that shares nothing with the others.
type ManifestFactory func(t *testing.T) artifacts.Manifest

// epoch is the suite's clock: times to the microsecond, which every store
// keeps, in a zone other than UTC, which stores need not keep.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.FixedZone("CET", 3600))

func at(minutes int) time.Time { return epoch.Add(time.Duration(minutes) * time.Minute) }

func pendingUpload(id, run, name string) *artifacts.PendingUpload {
	return &artifacts.PendingUpload{
		ID: id, Repo: "acme/api", RunID: run, JobID: "build", Attempt: 1, Name: name, Type: artifacts.TypeArchive,
		Size: 42, SHA256: strings.Repeat("ab", 32), Files: 3, ExpireIn: 72 * time.Hour, Scope: "refs/heads/main",
		BlobKey: "artifacts/" + run + "/" + id, MultipartID: "mp-" + id, CreatedAt: at(0), ExpiresAt: at(60),
	}
}

func artifact(id, run, job string, attempt int, name string) *artifacts.Artifact {
	return &artifacts.Artifact{
		ID: id, Repo: "acme/api", RunID: run, JobID: job, Attempt: attempt, Name: name, Type: artifacts.TypeArchive,
		Size: 42, SHA256: strings.Repeat("cd", 32), Files: 2, BlobKey: "artifacts/" + run + "/" + id,
		CreatedAt: at(1), ExpiresAt: at(24 * 60),
	}
}

// finish records a as the artifact of a new upload.
func finish(t *testing.T, m artifacts.Manifest, a *artifacts.Artifact) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, m.UploadCreate(ctx, pendingUpload("up-"+a.ID, a.RunID, a.Name)))
	replaced, err := m.UploadFinish(ctx, "up-"+a.ID, a, false)
	require.NoError(t, err, "UploadFinish %s", a.ID)
	require.Nil(t, replaced)
}

func list(t *testing.T, m artifacts.Manifest, f artifacts.ArtifactFilter) []artifacts.Artifact {
	t.Helper()
	got, err := m.ArtifactsList(context.Background(), f)
	require.NoError(t, err, "ArtifactsList %+v", f)
	return got
}

func ids(as []artifacts.Artifact) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func requireDiff(t *testing.T, want, got any, msg string, args ...any) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		require.Fail(t, fmt.Sprintf(msg, args...), "(-want +got):\n%s", diff)
	}
}

// ExerciseManifest runs the Manifest conformance suite.
func ExerciseManifest(t *testing.T, factory ManifestFactory) {
	t.Run("Uploads", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		u := pendingUpload("u1", "run-1", "dist")
		u.Cache, u.Overwrite, u.Stored, u.Report = true, true, true, "junit"
		require.NoError(t, m.UploadCreate(ctx, u))
		u.Name = "changed after"
		got, err := m.UploadGet(ctx, "u1")
		require.NoError(t, err)
		want := pendingUpload("u1", "run-1", "dist")
		want.Cache, want.Overwrite, want.Stored, want.Report = true, true, true, "junit"
		requireDiff(t, want, got, "the upload as created, not as the caller changed it after")
		got.Name = "changed by the reader"
		again, err := m.UploadGet(ctx, "u1")
		require.NoError(t, err)
		requireDiff(t, want, again, "the upload as created, not as a reader changed it")

		require.Error(t, m.UploadCreate(ctx, pendingUpload("u1", "run-1", "other")), "an ID in progress")
		_, err = m.UploadGet(ctx, "nope")
		require.ErrorIs(t, err, cikit.ErrNotFound)
		deleted, err := m.UploadDelete(ctx, "u1")
		require.NoError(t, err)
		require.True(t, deleted, "the call that removed it says so")
		_, err = m.UploadGet(ctx, "u1")
		require.ErrorIs(t, err, cikit.ErrNotFound, "a deleted upload")
		deleted, err = m.UploadDelete(ctx, "u1")
		require.NoError(t, err, "deleting twice")
		require.False(t, deleted, "deleting twice")
		deleted, err = m.UploadDelete(ctx, "never")
		require.NoError(t, err, "deleting what never was")
		require.False(t, deleted, "deleting what never was")
	})

	t.Run("FinishOnce", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u1", "run-1", "dist")))
		a := artifact("a1", "run-1", "build", 1, "dist")
		replaced, err := m.UploadFinish(ctx, "u1", a, false)
		require.NoError(t, err)
		require.Nil(t, replaced)
		_, err = m.UploadGet(ctx, "u1")
		require.ErrorIs(t, err, cikit.ErrNotFound, "a finished upload is no longer in progress")
		requireDiff(t, []artifacts.Artifact{*a}, list(t, m, artifacts.ArtifactFilter{RunID: "run-1"}), "the artifact is listed")

		_, err = m.UploadFinish(ctx, "u1", artifact("a2", "run-1", "build", 1, "other"), false)
		require.ErrorIs(t, err, cikit.ErrNotFound, "a second finish")
		_, err = m.UploadFinish(ctx, "u1", artifact("a3", "run-1", "build", 1, "dist"), true)
		require.ErrorIs(t, err, cikit.ErrNotFound, "a second finish, replacing")
		_, err = m.UploadFinish(ctx, "never", artifact("a4", "run-1", "build", 1, "never"), false)
		require.ErrorIs(t, err, cikit.ErrNotFound, "a finish of an upload never created")
		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u5", "run-1", "gone")))
		_, err = m.UploadDelete(ctx, "u5")
		require.NoError(t, err)
		_, err = m.UploadFinish(ctx, "u5", artifact("a5", "run-1", "build", 1, "gone"), false)
		require.ErrorIs(t, err, cikit.ErrNotFound, "a finish of a deleted upload")
		requireDiff(t, []artifacts.Artifact{*a}, list(t, m, artifacts.ArtifactFilter{RunID: "run-1"}), "failed finishes record nothing")
	})

	t.Run("Abort", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u1", "run-1", "dist")))
		aborted, err := m.UploadAbort(ctx, "u1")
		require.NoError(t, err)
		require.True(t, aborted, "the call that aborted it says so")
		got, err := m.UploadGet(ctx, "u1")
		require.NoError(t, err, "an aborted upload is kept")
		want := pendingUpload("u1", "run-1", "dist")
		want.Aborted = true
		requireDiff(t, want, got, "the upload, aborted")
		aborted, err = m.UploadAbort(ctx, "u1")
		require.NoError(t, err, "aborting twice")
		require.False(t, aborted, "aborting twice")
		aborted, err = m.UploadAbort(ctx, "never")
		require.NoError(t, err, "aborting what never was")
		require.False(t, aborted, "aborting what never was")
		_, err = m.UploadFinish(ctx, "u1", artifact("a1", "run-1", "build", 1, "dist"), false)
		require.ErrorIs(t, err, cikit.ErrNotFound, "an aborted upload is not finished")
		require.Empty(t, list(t, m, artifacts.ArtifactFilter{RunID: "run-1"}), "nor is its artifact recorded")
		expired, err := m.UploadsExpired(ctx, want.ExpiresAt.Add(time.Second), 10)
		require.NoError(t, err)
		requireDiff(t, []artifacts.PendingUpload{*want}, expired, "an aborted upload is swept once it expires")
		deleted, err := m.UploadDelete(ctx, "u1")
		require.NoError(t, err)
		require.True(t, deleted)
		_, err = m.UploadGet(ctx, "u1")
		require.ErrorIs(t, err, cikit.ErrNotFound)

		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u2", "run-1", "done")))
		_, err = m.UploadFinish(ctx, "u2", artifact("a2", "run-1", "build", 1, "done"), false)
		require.NoError(t, err)
		aborted, err = m.UploadAbort(ctx, "u2")
		require.NoError(t, err)
		require.False(t, aborted, "a finished upload is not aborted")
	})

	t.Run("FinishConcurrently", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		// SAFETY: of two finishes of one upload, exactly one records its
		// artifact; the other is cikit.ErrNotFound. With and without
		// replace, and with one name or two.
		for round := range 20 {
			run := fmt.Sprintf("run-%d", round)
			id := "up-" + run
			require.NoError(t, m.UploadCreate(ctx, pendingUpload(id, run, "dist")))
			replace := round%2 == 1
			names := []string{"dist", "dist"}
			if round%4 >= 2 {
				names[1] = "other"
			}
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Go(func() {
					_, errs[i] = m.UploadFinish(ctx, id, artifact(fmt.Sprintf("%s-%d", run, i), run, "build", 1, names[i]), replace)
				})
			}
			wg.Wait()
			won := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, won, "round %d: both finishes succeeded", round)
					won = i
				} else {
					require.ErrorIs(t, err, cikit.ErrNotFound, "round %d: the losing finish", round)
				}
			}
			require.NotEqual(t, -1, won, "round %d: no finish succeeded: %v", round, errs)
			requireDiff(t, []string{fmt.Sprintf("%s-%d", run, won)}, ids(list(t, m, artifacts.ArtifactFilter{RunID: run})),
				"round %d: the winner's artifact alone", round)
		}
	})

	t.Run("DeleteConcurrently", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		var ids []string
		for i := range 10 {
			id := fmt.Sprintf("a%d", i)
			finish(t, m, artifact(id, "run-1", "build", 1, "n"+id))
			ids = append(ids, id)
			require.NoError(t, m.UploadCreate(ctx, pendingUpload("u"+id, "run-1", "n"+id)))
		}
		// Several pruners delete the same rows at once: each row is
		// reported removed by one of them.
		const callers = 4
		deleted := make([][]string, callers)
		uploads := make([]int, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				var err error
				if deleted[c], err = m.ArtifactsDelete(ctx, ids); err != nil {
					errs[c] = err
					return
				}
				for _, id := range ids {
					ok, err := m.UploadDelete(ctx, "u"+id)
					if err != nil {
						errs[c] = err
						return
					}
					if ok {
						uploads[c]++
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		var all []string
		total := 0
		for c := range callers {
			all = append(all, deleted[c]...)
			total += uploads[c]
		}
		requireDiff(t, ids, sorted(all), "each artifact removed once")
		require.Equal(t, len(ids), total, "each upload removed once")
		require.Empty(t, list(t, m, artifacts.ArtifactFilter{RunID: "run-1"}))
	})

	t.Run("NameUniqueInRun", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		first := artifact("a1", "run-1", "build", 1, "dist")
		finish(t, m, first)
		finish(t, m, artifact("b1", "run-2", "build", 1, "dist")) // another run

		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u2", "run-1", "dist")))
		_, err := m.UploadFinish(ctx, "u2", artifact("a2", "run-1", "test", 1, "dist"), false)
		require.ErrorIs(t, err, artifacts.ErrRefused, "a name the run has, from another job")
		requireDiff(t, []string{"a1"}, ids(list(t, m, artifacts.ArtifactFilter{RunID: "run-1"})), "a refused finish records nothing")
		_, err = m.UploadGet(ctx, "u2")
		require.NoError(t, err, "a refused finish leaves the upload in progress")

		second := artifact("a2", "run-1", "test", 1, "dist")
		second.CreatedAt = at(5)
		replaced, err := m.UploadFinish(ctx, "u2", second, true)
		require.NoError(t, err, "replacing")
		requireDiff(t, first, replaced, "the replaced artifact")
		requireDiff(t, []artifacts.Artifact{*second}, list(t, m, artifacts.ArtifactFilter{RunID: "run-1"}), "the new artifact alone")
		requireDiff(t, []string{"b1"}, ids(list(t, m, artifacts.ArtifactFilter{RunID: "run-2"})), "the other run's stays")

		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u3", "run-1", "fresh")))
		replaced, err = m.UploadFinish(ctx, "u3", artifact("a3", "run-1", "test", 1, "fresh"), true)
		require.NoError(t, err, "replace with nothing to replace")
		require.Nil(t, replaced)
	})

	t.Run("ReplaceConcurrently", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		// SAFETY: concurrent replacing finishes of one name all succeed,
		// one artifact stays, and every other is replaced exactly once.
		const n = 8
		for i := range n {
			require.NoError(t, m.UploadCreate(ctx, pendingUpload(fmt.Sprint("u", i), "run-1", "dist")))
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		replaced := make([]*artifacts.Artifact, n)
		for i := range n {
			wg.Go(func() {
				replaced[i], errs[i] = m.UploadFinish(ctx, fmt.Sprint("u", i), artifact(fmt.Sprint("a", i), "run-1", "build", 1, "dist"), true)
			})
		}
		wg.Wait()
		seen := map[string]int{}
		for i := range n {
			require.NoError(t, errs[i], "finish %d", i)
			if replaced[i] != nil {
				seen[replaced[i].ID]++
			}
		}
		left := list(t, m, artifacts.ArtifactFilter{RunID: "run-1"})
		require.Len(t, left, 1, "one artifact named dist")
		require.Len(t, seen, n-1, "every artifact but the last is replaced: %v", seen)
		for id, count := range seen {
			require.Equal(t, 1, count, "%s is replaced once", id)
			require.NotEqual(t, left[0].ID, id, "the artifact left was not replaced")
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		for _, a := range []*artifacts.Artifact{
			artifact("t2-b", "run-1", "test", 2, "b"),
			artifact("b1-z", "run-1", "build", 1, "z"),
			artifact("t1-a", "run-1", "test", 1, "a"),
			artifact("b1-c", "run-1", "build", 1, "c"),
			artifact("t2-report", "run-1", "test", 2, "junit"),
			artifact("x", "run-2", "build", 1, "b"),
		} {
			if a.Name == "junit" {
				a.Type, a.Report = artifacts.TypeReport, "junit"
			}
			finish(t, m, a)
		}
		for _, tc := range []struct {
			name string
			f    artifacts.ArtifactFilter
			want []string
		}{
			{"the run", artifacts.ArtifactFilter{RunID: "run-1"}, []string{"b1-c", "b1-z", "t1-a", "t2-b", "t2-report"}},
			{"jobs", artifacts.ArtifactFilter{RunID: "run-1", JobIDs: []string{"test", "deploy"}}, []string{"t1-a", "t2-b", "t2-report"}},
			{"attempt", artifacts.ArtifactFilter{RunID: "run-1", JobIDs: []string{"test"}, Attempt: 2}, []string{"t2-b", "t2-report"}},
			{"name", artifacts.ArtifactFilter{RunID: "run-1", Name: "b"}, []string{"t2-b"}},
			{"type", artifacts.ArtifactFilter{RunID: "run-1", Type: artifacts.TypeReport}, []string{"t2-report"}},
			{"type archive", artifacts.ArtifactFilter{RunID: "run-1", Type: artifacts.TypeArchive, Attempt: 1}, []string{"b1-c", "b1-z", "t1-a"}},
			{"another run", artifacts.ArtifactFilter{RunID: "run-2"}, []string{"x"}},
			{"no such run", artifacts.ArtifactFilter{RunID: "run-3"}, []string{}},
			{"no such job", artifacts.ArtifactFilter{RunID: "run-1", JobIDs: []string{"deploy"}}, []string{}},
		} {
			requireDiff(t, tc.want, ids(list(t, m, tc.f)), "%s", tc.name)
		}
		_, err := m.ArtifactsList(ctx, artifacts.ArtifactFilter{JobIDs: []string{"build"}})
		require.ErrorIs(t, err, artifacts.ErrRefused, "a filter without a run")

		got := list(t, m, artifacts.ArtifactFilter{RunID: "run-2"})
		got[0].Name = "changed by the reader"
		require.Equal(t, "b", list(t, m, artifacts.ArtifactFilter{RunID: "run-2"})[0].Name, "answers are copies")
	})

	t.Run("UploadsExpired", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		for i, exp := range []int{30, 10, 20, 40, 10} {
			u := pendingUpload(fmt.Sprint("u", i), "run-1", "dist")
			u.ExpiresAt = at(exp)
			require.NoError(t, m.UploadCreate(ctx, u))
		}
		uploadIDs := func(before time.Time, limit int) []string {
			got, err := m.UploadsExpired(ctx, before, limit)
			require.NoError(t, err)
			out := []string{}
			for _, u := range got {
				out = append(out, u.ID)
			}
			return out
		}
		requireDiff(t, []string{"u1", "u4", "u2", "u0"}, uploadIDs(at(40), 10), "before t, oldest first (ties by ID)")
		requireDiff(t, []string{"u1", "u4"}, uploadIDs(at(40), 2), "up to limit")
		requireDiff(t, []string{}, uploadIDs(at(10), 10), "strictly before t")
		_, err := m.UploadsExpired(ctx, at(40), 0)
		require.Error(t, err, "a limit of 0")
	})

	t.Run("ArtifactsExpired", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		mk := func(id, repo, run string, defaultBranch bool, created, expires int) {
			a := artifact(id, run, "build", 1, id)
			a.Repo, a.DefaultBranch, a.CreatedAt = repo, defaultBranch, at(created)
			a.ExpiresAt = time.Time{}
			if expires >= 0 {
				a.ExpiresAt = at(expires)
			}
			finish(t, m, a)
		}
		// acme/api: main runs 1 and 2 (2 later), a branch's run 3 later
		// still. acme/web: one main run, and a main run whose artifacts
		// never expire and were created last.
		mk("api-1a", "acme/api", "api-1", true, 0, 100)
		mk("api-1b", "acme/api", "api-1", true, 1, 110)
		mk("api-2a", "acme/api", "api-2", true, 10, 90)
		mk("api-2b", "acme/api", "api-2", true, 11, 120)
		mk("api-3", "acme/api", "api-3", false, 20, 80)
		mk("web-1", "acme/web", "web-1", true, 0, 70)
		mk("web-2", "acme/web", "web-2", true, 30, -1)
		mk("keep", "acme/web", "web-3", false, 0, -1)
		mk("later", "acme/api", "api-4", false, 0, 500)
		expired := func(limit int, keep bool) []string {
			got, err := m.ArtifactsExpired(ctx, at(200), limit, keep)
			require.NoError(t, err)
			return ids(got)
		}
		requireDiff(t, []string{"web-1", "api-3", "api-2a", "api-1a", "api-1b", "api-2b"}, expired(10, false), "expired, soonest first")
		requireDiff(t, []string{"web-1", "api-3"}, expired(2, false), "up to limit")
		requireDiff(t, []string{"web-1", "api-3", "api-1a", "api-1b"}, expired(10, true),
			"the latest main run of acme/api is kept; of acme/web it is web-2, which never expires")
		_, err := m.ArtifactsExpired(ctx, at(200), 0, false)
		require.Error(t, err, "a limit of 0")

		deleted, err := m.ArtifactsDelete(ctx, []string{"api-2a", "api-2b", "unknown"})
		require.NoError(t, err)
		requireDiff(t, []string{"api-2a", "api-2b"}, sorted(deleted), "the IDs removed, not the unknown one")
		requireDiff(t, []string{"web-1", "api-3", "api-1a", "api-1b"}, expired(10, false), "deleted artifacts are gone")
		requireDiff(t, []string{"web-1", "api-3"}, expired(10, true), "api-1 is now the latest main run of acme/api")
		deleted, err = m.ArtifactsDelete(ctx, []string{"api-2a", "web-1"})
		require.NoError(t, err)
		requireDiff(t, []string{"web-1"}, deleted, "an artifact deleted before is not counted again")
		deleted, err = m.ArtifactsDelete(ctx, nil)
		require.NoError(t, err, "deleting nothing")
		require.Empty(t, deleted, "deleting nothing")
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		ctx := context.Background()
		long := strings.Repeat("n", artifacts.MaxNameLen+1)
		longest := strings.Repeat("n", artifacts.MaxNameLen)
		require.ErrorIs(t, m.UploadCreate(ctx, pendingUpload("u1", "run-1", long)), artifacts.ErrRefused, "a name too long")
		_, err := m.UploadGet(ctx, "u1")
		require.ErrorIs(t, err, cikit.ErrNotFound, "a refused upload is not recorded")
		require.NoError(t, m.UploadCreate(ctx, pendingUpload("u1", "run-1", longest)), "a name of MaxNameLen bytes")
		_, err = m.UploadFinish(ctx, "u1", artifact("a1", "run-1", "build", 1, long), false)
		require.ErrorIs(t, err, artifacts.ErrRefused, "an artifact's name too long")
		for _, bad := range []struct {
			what string
			edit func(*artifacts.Artifact)
		}{
			{"an empty name", func(a *artifacts.Artifact) { a.Name = "" }},
			{"no run", func(a *artifacts.Artifact) { a.RunID = "" }},
			{"no ID", func(a *artifacts.Artifact) { a.ID = "" }},
			{"a NUL in the name", func(a *artifacts.Artifact) { a.Name = "a\x00b" }},
			{"a name not UTF-8", func(a *artifacts.Artifact) { a.Name = "a\xffb" }},
		} {
			a := artifact("a1", "run-1", "build", 1, "dist")
			bad.edit(a)
			_, err = m.UploadFinish(ctx, "u1", a, false)
			require.ErrorIs(t, err, artifacts.ErrRefused, bad.what)
		}
		_, err = m.UploadGet(ctx, "u1")
		require.NoError(t, err, "refused finishes leave the upload in progress")
		_, err = m.UploadFinish(ctx, "u1", artifact("a1", "run-1", "build", 1, longest), false)
		require.NoError(t, err, "an artifact's name of MaxNameLen bytes")
		require.ErrorIs(t, m.UploadCreate(ctx, nil), artifacts.ErrRefused, "no upload")
	})

	t.Run("CancelledContext", func(t *testing.T) {
		t.Parallel()
		m := factory(t)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		err := m.UploadCreate(cancelled, pendingUpload("u1", "run-1", "dist"))
		require.True(t, errors.Is(err, context.Canceled), "UploadCreate: %v", err)
		_, err = m.UploadGet(context.Background(), "u1")
		require.ErrorIs(t, err, cikit.ErrNotFound, "nothing recorded")
	})
}
