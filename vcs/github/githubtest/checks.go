package githubtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

type checkRun struct {
	id                                int64
	app                               int64
	name, headSHA, status, conclusion string
	detailsURL, title, summary        string
	started, completed                time.Time
}

// CheckRun is a check run as GitHub keeps it.
type CheckRun struct {
	ID         int64
	Name       string
	HeadSHA    string
	Status     string // queued, in_progress or completed
	Conclusion string // when completed: success, failure, cancelled, skipped…
	DetailsURL string
	// Title and Summary are the run's output; empty when it has none.
	Title, Summary         string
	StartedAt, CompletedAt time.Time
}

var (
	checkStatuses    = []string{"queued", "in_progress", "completed"}
	checkConclusions = []string{"action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"}
)

// CheckRuns returns the latest check run of each name on commit sha of
// repo, sorted by name.
func (s *Server) CheckRuns(repoName, sha string) ([]CheckRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.repo(repoName)
	if err != nil {
		return nil, err
	}
	latest := map[string]CheckRun{}
	for _, cr := range r.checkRuns {
		if cr.headSHA == sha {
			latest[cr.name] = CheckRun{ID: cr.id, Name: cr.name, HeadSHA: cr.headSHA, Status: cr.status,
				Conclusion: cr.conclusion, DetailsURL: cr.detailsURL, Title: cr.title, Summary: cr.summary,
				StartedAt: cr.started, CompletedAt: cr.completed}
		}
	}
	return slices.SortedFunc(maps.Values(latest), func(a, b CheckRun) int { return strings.Compare(a.Name, b.Name) }), nil
}

// checkRunInput is the body of a create or an update; nil is absent.
type checkRunInput struct {
	Name        *string    `json:"name"`
	HeadSHA     *string    `json:"head_sha"`
	DetailsURL  *string    `json:"details_url"`
	Status      *string    `json:"status"`
	Conclusion  *string    `json:"conclusion"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	Output      *struct {
		Title   *string `json:"title"`
		Summary *string `json:"summary"`
	} `json:"output"`
}

// appOnly answers 403 unless c is an App's installation: GitHub lets
// only Apps write check runs.
func appOnly(w http.ResponseWriter, c caller) bool {
	if c.installation != 0 {
		return true
	}
	writeJSON(w, http.StatusForbidden, map[string]any{
		"message":           "You must authenticate via a GitHub App.",
		"documentation_url": docsURL + "/checks/runs#create-a-check-run",
		"status":            "403",
	})
	return false
}

func (s *Server) createCheckRun(w http.ResponseWriter, req *http.Request, r *repo, c caller) {
	if !appOnly(w, c) {
		return
	}
	var in checkRunInput
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	switch {
	case in.Name == nil || *in.Name == "":
		checkInvalid(w, "name", "name wasn't supplied.")
		return
	case in.HeadSHA == nil || *in.HeadSHA == "":
		checkInvalid(w, "head_sha", "head_sha wasn't supplied.")
		return
	case r.commits[*in.HeadSHA] == nil:
		writeError(w, http.StatusUnprocessableEntity, "No commit found for SHA: "+*in.HeadSHA)
		return
	}
	now := s.now().UTC()
	cr := &checkRun{app: s.installs[c.installation].app, name: *in.Name, headSHA: *in.HeadSHA, status: "queued", started: now}
	if in.StartedAt != nil {
		cr.started = in.StartedAt.UTC()
	}
	if !s.applyCheckRun(w, cr, &in, now) {
		return
	}
	s.seq++
	cr.id = s.seq
	r.checkRuns = append(r.checkRuns, cr)
	s.stats.CheckRunsCreated++
	writeJSON(w, http.StatusCreated, checkRunJSON(req, r, cr))
}

func (s *Server) updateCheckRun(w http.ResponseWriter, req *http.Request, r *repo, c caller) {
	if !appOnly(w, c) {
		return
	}
	id, _ := strconv.ParseInt(req.PathValue("id"), 10, 64)
	i := slices.IndexFunc(r.checkRuns, func(cr *checkRun) bool { return cr.id == id })
	if i < 0 {
		notFound(w)
		return
	}
	var in checkRunInput
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if in.Name != nil && *in.Name == "" {
		checkInvalid(w, "name", "name can't be blank.")
		return
	}
	// Validate on a copy: a refused update changes nothing.
	cr := *r.checkRuns[i]
	if in.Name != nil {
		cr.name = *in.Name
	}
	if !s.applyCheckRun(w, &cr, &in, s.now().UTC()) {
		return
	}
	*r.checkRuns[i] = cr
	s.stats.CheckRunsUpdated++
	writeJSON(w, http.StatusOK, checkRunJSON(req, r, &cr))
}

// applyCheckRun writes in's status, conclusion, details and output over
// cr, as GitHub does: a conclusion completes the run, a status other
// than completed clears the conclusion, and a completed run needs one.
// It answers 422 and reports false when the result is not valid.
func (s *Server) applyCheckRun(w http.ResponseWriter, cr *checkRun, in *checkRunInput, now time.Time) bool {
	if in.Status != nil {
		if !slices.Contains(checkStatuses, *in.Status) {
			checkInvalid(w, "status", *in.Status+" is not a valid status")
			return false
		}
		cr.status = *in.Status
		if cr.status != "completed" {
			cr.conclusion, cr.completed = "", time.Time{}
		}
	}
	if in.Conclusion != nil {
		if !slices.Contains(checkConclusions, *in.Conclusion) {
			checkInvalid(w, "conclusion", *in.Conclusion+" is not a valid conclusion")
			return false
		}
		cr.status, cr.conclusion = "completed", *in.Conclusion
	}
	if cr.status == "completed" && cr.conclusion == "" {
		checkInvalid(w, "conclusion", "conclusion wasn't supplied.")
		return false
	}
	if cr.status == "completed" {
		cr.completed = now
		if in.CompletedAt != nil {
			cr.completed = in.CompletedAt.UTC()
		}
	}
	if in.DetailsURL != nil {
		cr.detailsURL = *in.DetailsURL
	}
	if o := in.Output; o != nil {
		if o.Title == nil || o.Summary == nil {
			checkInvalid(w, "output", "output needs a title and a summary.")
			return false
		}
		cr.title, cr.summary = *o.Title, *o.Summary
	}
	return true
}

// listCheckRuns lists the check runs of a commit, newest first, by
// check_name, status and app_id; filter=latest (the default) keeps the
// newest of each name.
func (s *Server) listCheckRuns(w http.ResponseWriter, req *http.Request, r *repo) {
	c := r.resolve(req.PathValue("ref"))
	if c == nil {
		notFound(w)
		return
	}
	q := req.URL.Query()
	filter := cmp.Or(q.Get("filter"), "latest")
	if filter != "latest" && filter != "all" {
		checkInvalid(w, "filter", filter+" is not a valid filter")
		return
	}
	seen := map[string]bool{}
	var list []*checkRun
	for _, cr := range slices.Backward(r.checkRuns) {
		switch {
		case cr.headSHA != c.sha,
			q.Has("check_name") && q.Get("check_name") != cr.name,
			q.Has("status") && q.Get("status") != cr.status,
			q.Has("app_id") && q.Get("app_id") != strconv.FormatInt(cr.app, 10),
			filter == "latest" && seen[cr.name]:
			continue
		}
		seen[cr.name] = true
		list = append(list, cr)
	}
	page, perPage := pageParams(q, 30)
	link(w, req, page, perPage, max(1, pages(len(list), perPage)))
	runs := []map[string]any{}
	for _, cr := range pageOf(list, page, perPage) {
		runs = append(runs, checkRunJSON(req, r, cr))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(list), "check_runs": runs})
}

func checkRunJSON(req *http.Request, r *repo, cr *checkRun) map[string]any {
	self := apiURL(req, fmt.Sprintf("/repos/%s/check-runs/%d", r.fullName(), cr.id))
	var conclusion, completed, title, summary any
	if cr.conclusion != "" {
		conclusion = cr.conclusion
	}
	if !cr.completed.IsZero() {
		completed = cr.completed.Format(time.RFC3339)
	}
	if cr.title != "" || cr.summary != "" {
		title, summary = cr.title, cr.summary
	}
	return map[string]any{
		"id":           cr.id,
		"node_id":      fmt.Sprintf("CR_%d", cr.id),
		"name":         cr.name,
		"head_sha":     cr.headSHA,
		"external_id":  "",
		"url":          self,
		"html_url":     fmt.Sprintf("https://github.com/%s/runs/%d", r.fullName(), cr.id),
		"details_url":  cr.detailsURL,
		"status":       cr.status,
		"conclusion":   conclusion,
		"started_at":   cr.started.Format(time.RFC3339),
		"completed_at": completed,
		"output": map[string]any{
			"title":             title,
			"summary":           summary,
			"text":              nil,
			"annotations_count": 0,
			"annotations_url":   self + "/annotations",
		},
		"check_suite":   map[string]any{"id": r.id*1000 + 1},
		"app":           map[string]any{"id": cr.app},
		"pull_requests": []any{},
	}
}

func checkInvalid(w http.ResponseWriter, field, message string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]any{{"resource": "CheckRun", "field": field, "code": "custom", "message": message}},
		"documentation_url": docsURL + "/checks/runs",
		"status":            "422",
	})
}
