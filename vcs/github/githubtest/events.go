package githubtest

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The events API lists what happened in the last 90 days, 300 events at
// most.
const (
	eventsKept   = 300
	eventsMaxAge = 90 * 24 * time.Hour
	eventCommits = 20 // a PushEvent's payload lists at most this many commits
	zeroSHA      = "0000000000000000000000000000000000000000"
	defaultActor = "githubtest"
)

// Event is an entry of a repository's events API.
type Event struct {
	// ID is the server's, set when the event is recorded.
	ID string
	// Type is GitHub's event type: "PushEvent", "CreateEvent",
	// "WatchEvent"…
	Type string
	// Actor is the login of who acted. Default: "githubtest".
	Actor string
	// Payload is the event's payload, as GitHub sends it.
	Payload map[string]any
	// CreatedAt is when it happened. Default: the server's clock, to the
	// second.
	CreatedAt time.Time
}

// AddEvent records e in the events of repo and returns it as recorded.
// Seeding records the events of what it does (Commit, Branch, Tag and
// AnnotatedTag a PushEvent for a ref they move, and a CreateEvent before
// it for a ref they create); AddEvent adds others, such as the PushEvent
// of a deleted branch (head all zeros).
func (s *Server) AddEvent(repoName string, e Event) (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return Event{}, err
	}
	return *s.addEvent(r, e), nil
}

func (s *Server) addEvent(r *repo, e Event) *Event {
	s.seq++
	e.ID = strconv.FormatInt(s.seq, 10)
	if e.Actor == "" {
		e.Actor = defaultActor
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.now().UTC().Truncate(time.Second)
	}
	e.Payload = maps.Clone(e.Payload)
	r.events = append(r.events, &e)
	return &e
}

// Events returns the events recorded of repo, newest first, whether or
// not the events API still lists them.
func (s *Server) Events(repoName string) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(r.events))
	for _, e := range slices.Backward(r.events) {
		c := *e
		c.Payload = maps.Clone(e.Payload)
		out = append(out, c)
	}
	return out, nil
}

// DropEvents removes the events of repo that drop reports true for, as
// if GitHub had never recorded them, and returns how many it removed.
func (s *Server) DropEvents(repoName string, drop func(Event) bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return 0, err
	}
	n := len(r.events)
	r.events = slices.DeleteFunc(r.events, func(e *Event) bool { return drop(*e) })
	return n - len(r.events), nil
}

// moveRef records the events of ref (refs/heads/… or refs/tags/…) of r
// moving from before ("" for a new ref) to head, pushing commits.
func (s *Server) moveRef(r *repo, ref, before, head string, commits []*commit) {
	if before == head {
		return
	}
	if before == "" {
		refType, name := "branch", strings.TrimPrefix(ref, "refs/heads/")
		if t, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
			refType, name = "tag", t
		}
		s.addEvent(r, Event{Type: "CreateEvent", Payload: map[string]any{
			"ref": name, "ref_type": refType, "master_branch": r.defaultBranch, "description": nil, "pusher_type": "user",
		}})
		before = zeroSHA
	}
	listed := make([]map[string]any, 0, min(len(commits), eventCommits))
	for _, c := range commits[max(0, len(commits)-eventCommits):] {
		listed = append(listed, map[string]any{
			"sha":      c.sha,
			"author":   map[string]any{"name": "githubtest", "email": "githubtest@example.com"},
			"message":  c.message,
			"distinct": true,
		})
	}
	s.seq++
	s.addEvent(r, Event{Type: "PushEvent", Payload: map[string]any{
		"repository_id": r.id,
		"push_id":       s.seq,
		"size":          len(commits),
		"distinct_size": len(commits),
		"ref":           ref,
		"head":          head,
		"before":        before,
		"commits":       listed,
	}})
}

// newCommits returns the commits a ref moving from commit before ("" for
// a new ref) to commit head brings, oldest first. A new ref brings none:
// seeding points it at commits the repository has already.
func (r *repo) newCommits(before, head string) []*commit {
	if before == "" || r.commits[before] == nil {
		return nil
	}
	old := r.ancestors(r.commits[before])
	var out []*commit
	for sha := range r.ancestors(r.commits[head]) {
		if !old[sha] {
			out = append(out, r.commits[sha])
		}
	}
	slices.SortFunc(out, func(a, b *commit) int { return int(a.seq - b.seq) })
	return out
}

// listEvents serves the events of the last 90 days, the newest 300,
// newest first.
func (s *Server) listEvents(w http.ResponseWriter, req *http.Request, r *repo) {
	oldest := s.now().Add(-eventsMaxAge)
	var list []*Event
	for _, e := range slices.Backward(r.events) {
		if len(list) == eventsKept || e.CreatedAt.Before(oldest) {
			break
		}
		list = append(list, e)
	}
	page, perPage := pageParams(req.URL.Query(), 30)
	link(w, req, page, perPage, max(1, pages(len(list), perPage)))
	out := []map[string]any{}
	for _, e := range pageOf(list, page, perPage) {
		out = append(out, map[string]any{
			"id":   e.ID,
			"type": e.Type,
			"actor": map[string]any{
				"id": 1, "login": e.Actor, "display_login": e.Actor, "gravatar_id": "",
				"url":        apiURL(req, "/users/"+e.Actor),
				"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/%s?", e.Actor),
			},
			"repo":       map[string]any{"id": r.id, "name": r.fullName(), "url": apiURL(req, "/repos/"+r.fullName())},
			"payload":    e.Payload,
			"public":     false,
			"created_at": e.CreatedAt.UTC().Format(time.RFC3339),
		})
	}
	writeJSON(w, http.StatusOK, out)
}
