package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/cikit/cikit/artifacts"
)

// Artifacts lists the artifacts of runs (artifacts.Service).
type Artifacts interface {
	// RunArtifacts returns the run's artifacts that have not expired,
	// each with a presigned Download.
	RunArtifacts(ctx context.Context, runID string) ([]artifacts.Artifact, error)
}

// Artifact is an artifact of a job as the API shows it: in a job's
// "artifacts" and in GET /api/v1/runs/{run}/artifacts.
type Artifact struct {
	ID      string `json:"id"`
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Name    string `json:"name"`
	// Type is "archive" (a tar archive, zstd-compressed, of the job's
	// paths) or "report" (a GitLab report, Report naming its type).
	Type   string `json:"type"`
	Report string `json:"report,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Files  int    `json:"files,omitempty"`
	// CreatedAt is when it was finalized; ExpiresAt when it is deleted,
	// absent for never.
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// DownloadURL is the API route that redirects to a short-lived
	// download of the archive.
	DownloadURL string `json:"download_url"`
}

// ArtifactList is the answer of GET /api/v1/runs/{run}/artifacts.
type ArtifactList struct {
	Artifacts []Artifact `json:"artifacts"`
}

func artifactView(a artifacts.Artifact) Artifact {
	return Artifact{ID: a.ID, JobID: a.JobID, Attempt: a.Attempt, Name: a.Name, Type: a.Type, Report: a.Report,
		Size: a.Size, SHA256: a.SHA256, Files: a.Files, CreatedAt: utc(a.CreatedAt), ExpiresAt: utc(a.ExpiresAt),
		DownloadURL: Prefix + "/runs/" + url.PathEscape(a.RunID) + "/artifacts/" + url.PathEscape(a.ID) + "/download"}
}

// runArtifacts returns the run's artifacts, answering the request itself
// when it cannot.
func (a *API) runArtifacts(w http.ResponseWriter, r *http.Request) ([]artifacts.Artifact, bool) {
	if a.arts == nil {
		writeError(w, http.StatusNotFound, "this platform keeps no artifacts")
		return nil, false
	}
	runID := r.PathValue("run")
	if _, err := a.runs.RunGet(r.Context(), runID); err != nil {
		a.fail(w, r, "reading the run", err)
		return nil, false
	}
	list, err := a.arts.RunArtifacts(r.Context(), runID)
	if err != nil {
		a.fail(w, r, "listing the run's artifacts", err)
		return nil, false
	}
	return list, true
}

func (a *API) listArtifacts(w http.ResponseWriter, r *http.Request) {
	if !idsAndNoQuery(w, r, "run") {
		return
	}
	list, ok := a.runArtifacts(w, r)
	if !ok {
		return
	}
	out := ArtifactList{Artifacts: make([]Artifact, len(list))}
	for i, x := range list {
		out.Artifacts[i] = artifactView(x)
	}
	writeJSON(w, http.StatusOK, out)
}

// downloadArtifact redirects to a short-lived download of the artifact's
// archive.
func (a *API) downloadArtifact(w http.ResponseWriter, r *http.Request) {
	if !idsAndNoQuery(w, r, "run", "artifact") {
		return
	}
	list, ok := a.runArtifacts(w, r)
	if !ok {
		return
	}
	id := r.PathValue("artifact")
	for _, x := range list {
		if x.ID != id || x.Download == nil {
			continue
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, x.Download.URL, http.StatusFound)
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("run %q has no artifact %q (or it expired)", r.PathValue("run"), id))
}
