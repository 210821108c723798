package artifacts_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/artifacts"
)

// TestJobScopes: a job whose Admission sets a cache scope writes it
// whatever its run's context says, and reads it, then its base branch's;
// a job without one gets the run's scopes.
func TestJobScopes(t *testing.T) {
	t.Parallel()
	push := &cikit.RunContext{Repository: "acme/api", RefType: "branch", RefName: "main", DefaultBranch: "main"}
	pr := &cikit.RunContext{Repository: "acme/api", RefType: "branch", RefName: "7/merge", PRNumber: 7, HeadRef: "feature", BaseRef: "release", DefaultBranch: "main"}
	admitted := func(scope string) *cikit.JobSpec {
		return &cikit.JobSpec{ID: "build", Admission: &cikit.Admission{Decision: cikit.DecisionAllow, CacheScope: scope}}
	}
	for _, c := range []struct {
		name  string
		rc    *cikit.RunContext
		spec  *cikit.JobSpec
		write string
		read  []string
	}{
		{"push without admission", push, &cikit.JobSpec{ID: "build"}, "branch/main", []string{"branch/main"}},
		{"push with admission and no scope", push, admitted(""), "branch/main", []string{"branch/main"}},
		{"push capped to a fork's scope", push, admitted("fork/pr-7"), "fork/pr-7", []string{"fork/pr-7", "branch/main"}},
		{"pull request reads its base", pr, admitted("untrusted/pr-7"), "untrusted/pr-7", []string{"untrusted/pr-7", "branch/release"}},
		{"the scope is the base branch's", push, admitted("branch/main"), "branch/main", []string{"branch/main"}},
		{"no context", nil, admitted("fork/pr-7"), "fork/pr-7", []string{"fork/pr-7"}},
	} {
		ref := artifacts.JobRefFor(c.rc, "run-1", c.spec, 1)
		require.Equal(t, c.write, ref.Scope, c.name)
		require.Equal(t, c.read, ref.ReadScopes, c.name)
	}
}

// TestServiceAdmittedCacheScope: a job of a push to main whose Admission
// puts it in a fork's cache scope restores main's cache, and what it
// saves lands in its own scope, where main's jobs never read.
func TestServiceAdmittedCacheScope(t *testing.T) {
	t.Parallel()
	b := setupService(t, setupFileTransfer(t), memoryStores, nil)
	ctx := t.Context()
	push := &cikit.RunContext{Repository: "acme/api", RefType: "branch", RefName: "main", DefaultBranch: "main"}
	trusted := artifacts.JobRefFor(push, "run-1", &cikit.JobSpec{ID: "build"}, 1)
	capped := artifacts.JobRefFor(push, "run-2", &cikit.JobSpec{ID: "build",
		Admission: &cikit.Admission{Decision: cikit.DecisionAllow, CacheScope: "fork/pr-7"}}, 1)
	later := artifacts.JobRefFor(push, "run-3", &cikit.JobSpec{ID: "build"}, 1)

	save := func(r artifacts.JobRef, key string, data []byte) {
		t.Helper()
		up, err := b.svc.ForJob(r).CreateUpload(ctx, artifacts.UploadRequest{Name: key, Cache: true, Size: int64(len(data)), SHA256: sha(data)})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, b.put(t, up, data))
		_, err = b.svc.ForJob(r).CompleteUpload(ctx, artifacts.CompleteRequest{UploadID: up.ID})
		require.NoError(t, err)
	}
	mains, _ := blob(1, 2000)
	poisoned, _ := blob(2, 2000)
	save(trusted, "go-mod", mains)
	requireCache(t, b, capped, "go-mod", mains)

	save(capped, "go-sum", poisoned)
	hit, err := b.svc.ForJob(later).LookupCache(ctx, artifacts.CacheQuery{Key: "go-sum"})
	require.NoError(t, err)
	require.Nil(t, hit, "main's jobs never read the capped job's save")
	requireCache(t, b, capped, "go-sum", poisoned)
}
