package gitlab_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs"
	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

var zeros = strings.Repeat("0", 40)

func TestPushes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	start := b.clock.Now()

	first := b.commit(t, repo, "main", map[string]string{"a": "1"})
	b.clock.Advance(time.Minute)
	second := b.commit(t, repo, "main", map[string]string{"a": "2"})
	b.clock.Advance(time.Minute)
	feature := b.commit(t, repo, "feature", map[string]string{"b": "1"})
	b.clock.Advance(time.Minute)
	require.NoError(t, b.srv.Tag(repo, "v1.0", second))
	b.clock.Advance(time.Minute)
	require.NoError(t, b.srv.DeleteBranch(repo, "feature"))
	b.clock.Advance(time.Minute)
	require.NoError(t, b.srv.Branch(repo, "main", feature))
	b.clock.Advance(time.Minute)
	object, err := b.srv.AnnotatedTag(repo, "v2.0", feature)
	require.NoError(t, err)
	require.NotEqual(t, feature, object)

	got, err := b.p.Pushes(ctx, repo, start)
	require.NoError(t, err)
	at := func(minutes int) time.Time { return start.Add(time.Duration(minutes) * time.Minute) }
	want := []vcs.Push{
		{Branch: "main", Before: zeros, SHA: first, At: at(0), Actor: "gitlabtest"},
		{Branch: "main", Before: first, SHA: second, At: at(1), Actor: "gitlabtest"},
		{Branch: "feature", Before: zeros, SHA: feature, At: at(2), Actor: "gitlabtest"},
		{Tag: "v1.0", Before: zeros, SHA: second, At: at(3), Actor: "gitlabtest"},
		// The deletion of feature at minute 4 is not a push.
		{Branch: "main", Before: second, SHA: feature, At: at(5), Actor: "gitlabtest"},
		// The event names the tag object; the push, like the webhook,
		// its commit.
		{Tag: "v2.0", Before: zeros, SHA: feature, At: at(6), Actor: "gitlabtest"},
	}
	require.Empty(t, cmp.Diff(want, got), "oldest first, the deletion skipped")

	got, err = b.p.Pushes(ctx, repo, at(3))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(want[3:], got), "a push at since is in")
}

// TestPushesSince puts since near midnight, where GitLab's after, a date
// and exclusive, must be asked from the day before since's UTC day.
func TestPushesSince(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{}) // 2026-03-01T12:00Z
	b.project(t, repo, "main")
	b.clock.Advance(11 * time.Hour)
	late := b.commit(t, repo, "main", map[string]string{"a": "1"}) // 23:00Z
	b.clock.Advance(90 * time.Minute)
	early := b.commit(t, repo, "main", map[string]string{"a": "2"}) // 00:30Z the next day
	b.clock.Advance(90 * time.Minute)
	next := b.commit(t, repo, "main", map[string]string{"a": "3"}) // 02:00Z

	shas := func(since time.Time) []string {
		t.Helper()
		pushes, err := b.p.Pushes(ctx, repo, since)
		require.NoError(t, err)
		var out []string
		for _, p := range pushes {
			out = append(out, p.SHA)
		}
		return out
	}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, []string{late, early, next}, shas(day.Add(22*time.Hour)), "since's own day is asked for")
	require.Equal(t, []string{early, next}, shas(day.Add(23*time.Hour+time.Minute)), "what came before since is dropped")
	require.Equal(t, []string{early, next}, shas(day.Add(24*time.Hour)), "since at midnight")
	require.Equal(t, []string{next}, shas(day.Add(25*time.Hour)))
	plus3 := time.FixedZone("UTC+3", 3*60*60)
	require.Equal(t, []string{late, early, next}, shas(day.Add(22*time.Hour).In(plus3)),
		"since's day is taken in UTC, though it is 2026-03-02 in since's zone")
	require.Empty(t, shas(day.Add(48*time.Hour)))
}

func TestPushesPagination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")
	start := b.clock.Now()
	var want []string
	for i := range 130 {
		want = append(want, b.commit(t, repo, "main", map[string]string{"a": strconv.Itoa(i)}))
		b.clock.Advance(time.Second)
	}
	before := b.srv.Requests()
	pushes, err := b.p.Pushes(ctx, repo, start)
	require.NoError(t, err)
	require.Equal(t, 2, b.srv.Requests()-before, "pages of 100")
	var got []string
	for i, p := range pushes {
		got = append(got, p.SHA)
		if i > 0 {
			require.Equal(t, pushes[i-1].SHA, p.Before, "push %d follows the one before", i)
		}
	}
	require.Equal(t, want, got, "every page, oldest first")
}

func TestPushesErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, gitlabtest.Config{})
	b.project(t, repo, "main")

	pushes, err := b.p.Pushes(ctx, repo, b.clock.Now())
	require.NoError(t, err)
	require.Empty(t, pushes, "an empty project")

	_, err = b.p.Pushes(ctx, "acme/platform/nope", b.clock.Now())
	require.ErrorIs(t, err, vcs.ErrNotFound)
	require.ErrorContains(t, err, "acme/platform/nope")

	limited := setup(t, gitlabtest.Config{RateLimit: 1})
	limited.project(t, repo, "main")
	_, err = limited.p.Pushes(ctx, repo, limited.clock.Now())
	require.NoError(t, err)
	_, err = limited.p.Pushes(ctx, repo, limited.clock.Now())
	var rl *vcs.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, gitlabtest.DefaultRateWindow, rl.RetryAfter)
}
