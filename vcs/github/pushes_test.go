package github_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/github"
	"github.com/cikit/cikit/vcs/github/githubtest"
)

const zeros = "0000000000000000000000000000000000000000"

// Pushes lists branch and tag pushes oldest first, from since on; an
// annotated tag's push names its commit.
func TestPushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := b.clock.Now()
	c1 := b.repo(t, "acme/api", map[string]string{"a": "1"})
	b.clock.Advance(time.Minute)
	c2, err := b.srv.Commit("acme/api", "main", map[string]string{"a": "2"})
	require.NoError(t, err)
	b.clock.Advance(time.Minute)
	require.NoError(t, b.srv.Branch("acme/api", "feature", c2))
	b.clock.Advance(time.Minute)
	require.NoError(t, b.srv.Tag("acme/api", "v1", c1))
	b.clock.Advance(time.Minute)
	require.NoError(t, b.srv.AnnotatedTag("acme/api", "v2", c2, "release 2"))
	b.clock.Advance(time.Minute)
	_, err = b.srv.AddEvent("acme/api", githubtest.Event{Type: "WatchEvent", Actor: "fan", Payload: map[string]any{"action": "started"}})
	require.NoError(t, err)
	_, err = b.srv.AddEvent("acme/api", githubtest.Event{Type: "PushEvent", Actor: "alice", Payload: map[string]any{
		"ref": "refs/heads/feature", "before": c2, "head": zeros, "size": 0, "commits": []any{},
	}})
	require.NoError(t, err)
	_, err = b.srv.AddEvent("acme/api", githubtest.Event{Type: "PushEvent", Actor: "alice", Payload: map[string]any{
		"ref": "refs/notes/commits", "before": zeros, "head": c1, "size": 0, "commits": []any{},
	}})
	require.NoError(t, err)

	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	all := []vcs.Push{
		{Branch: "main", Before: zeros, SHA: c1, At: at(0), Actor: "githubtest"},
		{Branch: "main", Before: c1, SHA: c2, At: at(1), Actor: "githubtest"},
		{Branch: "feature", Before: zeros, SHA: c2, At: at(2), Actor: "githubtest"},
		{Tag: "v1", Before: zeros, SHA: c1, At: at(3), Actor: "githubtest"},
		{Tag: "v2", Before: zeros, SHA: c2, At: at(4), Actor: "githubtest"},
	}
	for _, p := range []*github.Provider{b.pat(t), b.app(t)} {
		got, err := p.Pushes(ctx, "acme/api", t0)
		require.NoError(t, err)
		require.Equal(t, all, got, "the deletion, the WatchEvent and the notes ref left out")

		got, err = p.Pushes(ctx, "acme/api", at(1))
		require.NoError(t, err)
		require.Equal(t, all[1:], got, "since is inclusive")

		got, err = p.Pushes(ctx, "acme/api", at(4).Add(time.Second))
		require.NoError(t, err)
		require.Empty(t, got)
	}
}

// Pushes reads pages until one reaches back past since, and no further.
func TestPushesPaginated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := b.clock.Now()
	want := []vcs.Push{{Branch: "main", Before: zeros, SHA: b.repo(t, "acme/api", map[string]string{"n": "0"}), At: t0, Actor: "githubtest"}}
	for i := 1; i <= 230; i++ {
		b.clock.Advance(time.Second)
		sha, err := b.srv.Commit("acme/api", "main", map[string]string{"n": fmt.Sprint(i)})
		require.NoError(t, err)
		want = append(want, vcs.Push{Branch: "main", Before: want[i-1].SHA, SHA: sha, At: b.clock.Now(), Actor: "githubtest"})
	}
	p := b.pat(t)
	for _, tc := range []struct {
		since    int // seconds after t0
		requests int
	}{
		{0, 3},   // 232 events (a CreateEvent, 231 pushes) on three pages of 100
		{100, 2}, // the second page reaches back past p100
		{200, 1}, // the first page reaches back past p200
	} {
		before := b.srv.Stats().Requests
		got, err := p.Pushes(ctx, "acme/api", t0.Add(time.Duration(tc.since)*time.Second))
		require.NoError(t, err)
		require.Equal(t, want[tc.since:], got, "since %ds", tc.since)
		require.Equal(t, tc.requests, b.srv.Stats().Requests-before, "since %ds", tc.since)
	}
}

// A push GitHub never listed is not there, and the events API forgets
// what is older than 90 days.
func TestPushesDroppedAndExpired(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := b.clock.Now()
	c1 := b.repo(t, "acme/api", map[string]string{"a": "1"})
	b.clock.Advance(time.Hour)
	c2, err := b.srv.Commit("acme/api", "main", map[string]string{"a": "2"})
	require.NoError(t, err)
	n, err := b.srv.DropEvents("acme/api", func(e githubtest.Event) bool { return e.Payload["head"] == c1 })
	require.NoError(t, err)
	require.Equal(t, 1, n)
	p := b.pat(t)
	got, err := p.Pushes(ctx, "acme/api", t0)
	require.NoError(t, err)
	require.Equal(t, []vcs.Push{{Branch: "main", Before: c1, SHA: c2, At: t0.Add(time.Hour), Actor: "githubtest"}}, got)

	b.clock.Advance(90*24*time.Hour - time.Hour + time.Second)
	got, err = p.Pushes(ctx, "acme/api", t0)
	require.NoError(t, err)
	require.Len(t, got, 1, "an hour younger than 90 days")
	b.clock.Advance(time.Hour)
	got, err = p.Pushes(ctx, "acme/api", t0)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestPushesErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.repo(t, "acme/api", map[string]string{"a": "1"})
	p := b.pat(t)
	_, err := p.Pushes(ctx, "acme/nope", time.Time{})
	require.ErrorIs(t, err, vcs.ErrNotFound)

	require.NoError(t, b.srv.CreateRepo("acme/other", "main"))
	_, err = b.app(t).Pushes(ctx, "acme/other", time.Time{})
	require.ErrorIs(t, err, github.ErrNotInstalled, "the App is not installed there")
	require.ErrorIs(t, err, vcs.ErrNotFound, "which GitHub cannot tell from a missing repository")

	b.srv.SetRateLimit(githubtest.RateLimit{Requests: 1, Window: time.Minute, Kind: githubtest.Primary})
	_, err = p.Pushes(ctx, "acme/api", time.Time{})
	require.NoError(t, err)
	_, err = p.Pushes(ctx, "acme/api", time.Time{})
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, time.Minute, rl.RetryAfter)
}
