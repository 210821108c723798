package gitlab_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
	"github.com/cikit/cikit/vcs/vcstest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	vcstest.Exercise(t, vcstest.Config{New: func(t *testing.T) (vcs.Provider, vcstest.Fixture) {
		b := setup(t, gitlabtest.Config{})
		return b.p, fixture{b.srv}
	}})
}

// fixture seeds gitlabtest for the conformance suite.
type fixture struct{ srv *gitlabtest.Server }

func (f fixture) CreateRepo(t *testing.T, repo, defaultBranch string) {
	t.Helper()
	_, err := f.srv.CreateProject(repo, defaultBranch)
	require.NoError(t, err)
}

func (f fixture) Commit(t *testing.T, repo, branch string, files map[string]string, deleted ...string) string {
	t.Helper()
	sha, err := f.srv.Commit(repo, branch, files, deleted...)
	require.NoError(t, err)
	return sha
}

func (f fixture) Branch(t *testing.T, repo, branch, sha string) {
	t.Helper()
	require.NoError(t, f.srv.Branch(repo, branch, sha))
}

func (f fixture) Tag(t *testing.T, repo, tag, sha string) {
	t.Helper()
	require.NoError(t, f.srv.Tag(repo, tag, sha))
}

func (f fixture) OpenPullRequest(t *testing.T, repo, headRepo, headBranch, baseBranch string) int {
	t.Helper()
	if headRepo != repo {
		require.NoError(t, f.srv.ForkRelation(headRepo, repo))
	}
	iid, err := f.srv.OpenMergeRequest(repo, headRepo, headBranch, baseBranch)
	require.NoError(t, err)
	return iid
}

func (f fixture) ClosePullRequest(t *testing.T, repo string, number int) {
	t.Helper()
	require.NoError(t, f.srv.CloseMergeRequest(repo, number))
}

// ourStates reads GitLab's status states back as ours.
var ourStates = map[string]vcs.State{
	"pending":  vcs.StatePending,
	"running":  vcs.StateRunning,
	"success":  vcs.StateSuccess,
	"failed":   vcs.StateFailure,
	"canceled": vcs.StateCancelled,
	"skipped":  vcs.StateSkipped,
}

func (f fixture) Statuses(t *testing.T, repo, sha string) []vcs.Status {
	t.Helper()
	got, err := f.srv.Statuses(repo, sha)
	require.NoError(t, err)
	var out []vcs.Status
	for _, st := range got {
		state, ok := ourStates[st.State]
		require.True(t, ok, "GitLab state %q", st.State)
		out = append(out, vcs.Status{Context: st.Name, State: state, Description: st.Description, TargetURL: st.TargetURL})
	}
	return out
}
