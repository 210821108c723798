package gitlabtest_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/vcs/gitlab/gitlabtest"
)

type event struct {
	ID             int     `json:"id"`
	ProjectID      int     `json:"project_id"`
	ActionName     string  `json:"action_name"`
	TargetType     *string `json:"target_type"`
	AuthorUsername string  `json:"author_username"`
	CreatedAt      string  `json:"created_at"`
	PushData       struct {
		CommitCount int     `json:"commit_count"`
		Action      string  `json:"action"`
		RefType     string  `json:"ref_type"`
		CommitFrom  *string `json:"commit_from"`
		CommitTo    *string `json:"commit_to"`
		Ref         string  `json:"ref"`
		CommitTitle *string `json:"commit_title"`
	} `json:"push_data"`
}

func (b *bundle) events(t *testing.T, query string) ([]event, response) {
	t.Helper()
	r := b.get(t, "projects/"+enc+"/events"+query)
	require.Equal(t, http.StatusOK, r.code, r.body)
	var out []event
	require.NoError(t, json.Unmarshal([]byte(r.body), &out))
	return out, r
}

func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{}) // 2027-01-15T08:00:00Z
	id := must(b.srv.CreateProject(project, "main"))(t)
	first := must(b.srv.Commit(project, "main", map[string]string{"a": "1"}))(t)
	b.clock.Advance(time.Minute)
	second := must(b.srv.Commit(project, "feature", map[string]string{"b": "1"}))(t)
	third := must(b.srv.Commit(project, "feature", map[string]string{"b": "2"}))(t)
	require.NoError(t, b.srv.Branch(project, "feature", third), "no move, no event")
	require.NoError(t, b.srv.Tag(project, "v1", first))
	require.NoError(t, b.srv.Branch(project, "main", third))
	require.NoError(t, b.srv.DeleteTag(project, "v1"))
	require.NoError(t, b.srv.DeleteBranch(project, "feature"))
	require.ErrorContains(t, b.srv.DeleteBranch(project, "main"), "default branch")
	require.ErrorContains(t, b.srv.DeleteTag(project, "v1"), "tag v1 is not in")
	require.Equal(t, http.StatusNotFound, b.get(t, "projects/"+enc+"/repository/tags/v1").code, "deleted")

	events, r := b.events(t, "")
	require.Equal(t, "7", r.header.Get("X-Total"))
	require.Len(t, events, 7)
	for i := 1; i < len(events); i++ {
		require.Greater(t, events[i-1].ID, events[i].ID, "newest first by default")
	}
	str := func(p *string) string {
		if p == nil {
			return "null"
		}
		return *p
	}
	type row struct {
		actionName, action, refType, ref, from, to string
		commits                                    int
	}
	var got []row
	for _, e := range events {
		got = append([]row{{e.ActionName, e.PushData.Action, e.PushData.RefType, e.PushData.Ref,
			str(e.PushData.CommitFrom), str(e.PushData.CommitTo), e.PushData.CommitCount}}, got...)
		require.Equal(t, id, e.ProjectID)
		require.Nil(t, e.TargetType)
		require.Equal(t, "gitlabtest", e.AuthorUsername)
	}
	require.Equal(t, []row{
		{"pushed new", "created", "branch", "main", "null", first, 1},
		{"pushed new", "created", "branch", "feature", "null", second, 1},
		{"pushed to", "pushed", "branch", "feature", second, third, 1},
		{"pushed new", "created", "tag", "v1", "null", first, 0},
		{"pushed to", "pushed", "branch", "main", first, third, 2},
		{"deleted", "removed", "tag", "v1", first, "null", 0},
		{"deleted", "removed", "branch", "feature", third, "null", 0},
	}, got)
	require.Equal(t, "2027-01-15T08:00:00.000Z", events[6].CreatedAt, "the server's clock, as GitLab writes it")
	require.Equal(t, "2027-01-15T08:01:00.000Z", events[5].CreatedAt)
	require.Equal(t, "Commit 1 on main", str(events[6].PushData.CommitTitle))
	require.Nil(t, events[0].PushData.CommitTitle, "a removal has no commit")

	asc, _ := b.events(t, "?sort=asc&action=pushed")
	require.Len(t, asc, 7)
	require.Equal(t, events[6].ID, asc[0].ID, "oldest first with sort=asc")
	none, _ := b.events(t, "?action=merged")
	require.Empty(t, none, "there are only push events")
	none, _ = b.events(t, "?target_type=issue")
	require.Empty(t, none)

	bad := b.get(t, "projects/"+enc+"/events?sort=sideways")
	require.Equal(t, http.StatusBadRequest, bad.code)
	bad = b.get(t, "projects/"+enc+"/events?after=yesterday")
	require.Equal(t, http.StatusBadRequest, bad.code)
	require.JSONEq(t, `{"error":"after is invalid"}`, bad.body)
	require.Equal(t, http.StatusNotFound, b.get(t, "projects/acme%2Fnope/events").code)
}

// TestEventsDates checks that after and before are dates and exclusive:
// events on the day named are out either way.
func TestEventsDates(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{}) // 2027-01-15T08:00:00Z
	must(b.srv.CreateProject(project, "main"))(t)
	var ids []string // one push a day, 15th to 18th, at 08:00Z
	for i := range 4 {
		sha := must(b.srv.Commit(project, "main", map[string]string{"a": strconv.Itoa(i)}))(t)
		ids = append(ids, sha)
		b.clock.Advance(24 * time.Hour)
	}
	to := func(query string) []string {
		t.Helper()
		events, _ := b.events(t, query)
		var out []string
		for _, e := range events {
			out = append(out, *e.PushData.CommitTo)
		}
		return out
	}
	require.Equal(t, ids[2:], to("?sort=asc&after=2027-01-16"))
	require.Equal(t, ids[:2], to("?sort=asc&before=2027-01-17"))
	require.Equal(t, ids[1:2], to("?sort=asc&after=2027-01-15&before=2027-01-17"))
	require.Empty(t, to("?after=2027-01-18"))
}

func TestEventsPagination(t *testing.T) {
	t.Parallel()
	b := setup(t, gitlabtest.Config{})
	must(b.srv.CreateProject(project, "main"))(t)
	for i := range 25 {
		must(b.srv.Commit(project, "main", map[string]string{"a": strconv.Itoa(i)}))(t)
	}
	all, _ := b.events(t, "?sort=asc&per_page=100")
	page, r := b.events(t, "?sort=asc&per_page=10&page=3")
	require.Equal(t, "25", r.header.Get("X-Total"))
	require.Empty(t, r.header.Get("X-Next-Page"), "the last page")
	require.Equal(t, all[20:], page)
	page, r = b.events(t, "?per_page=10&page=1")
	require.Equal(t, "2", r.header.Get("X-Next-Page"))
	require.Equal(t, all[24].ID, page[0].ID, "newest first")
}
