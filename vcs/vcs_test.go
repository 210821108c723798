package vcs_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var m vcs.Memory
	_, err := m.ReadFile(ctx, "acme/api", "abc", ".cikit.yml")
	require.ErrorIs(t, err, vcs.ErrNotFound, "no commit yet")

	m.AddCommit("acme/api", "abc", map[string]string{
		".cikit.yml":                "jobs: {}",
		".github/workflows/ci.yml":  "on: push",
		".github/workflows/b.yaml":  "on: push",
		".github/workflows/x/y.yml": "nested",
	})
	data, err := m.ReadFile(ctx, "acme/api", "abc", ".cikit.yml")
	require.NoError(t, err)
	require.Equal(t, "jobs: {}", string(data))
	data[0] = 'X'
	again, _ := m.ReadFile(ctx, "acme/api", "abc", ".cikit.yml")
	require.Equal(t, "jobs: {}", string(again), "results are copies")
	_, err = m.ReadFile(ctx, "acme/api", "abc", "missing")
	require.True(t, vcs.IsNotFound(err))

	names, err := m.ReadDir(ctx, "acme/api", "abc", ".github/workflows")
	require.NoError(t, err)
	require.Equal(t, []string{"b.yaml", "ci.yml"}, names)
	_, err = m.ReadDir(ctx, "acme/api", "abc", "nope")
	require.ErrorIs(t, err, vcs.ErrNotFound)

	_, ok, err := m.OpenPullRequest(ctx, "acme/api", "feature")
	require.NoError(t, err)
	require.False(t, ok)
	m.SetPullRequest("acme/api", "feature", 7)
	n, ok, err := m.OpenPullRequest(ctx, "acme/api", "feature")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 7, n)
	m.SetPullRequest("acme/api", "feature", 0)
	_, ok, _ = m.OpenPullRequest(ctx, "acme/api", "feature")
	require.False(t, ok, "closed")

	_, err = m.ResolveRef(ctx, "acme/api", "main")
	require.ErrorIs(t, err, vcs.ErrNotFound)
	m.SetRef("acme/api", "main", "abc")
	sha, err := m.ResolveRef(ctx, "acme/api", "main")
	require.NoError(t, err)
	require.Equal(t, "abc", sha)
}
