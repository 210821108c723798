package artifacts

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// MemoryManifest is a Manifest in memory, for tests and `cikit run`. Its
// zero value is not ready: use NewMemoryManifest.
type MemoryManifest struct {
	mu      sync.Mutex
	uploads map[string]PendingUpload
	// artifacts by ID.
	artifacts map[string]Artifact
}

var _ Manifest = (*MemoryManifest)(nil)

// NewMemoryManifest returns an empty manifest.
func NewMemoryManifest() *MemoryManifest {
	return &MemoryManifest{uploads: map[string]PendingUpload{}, artifacts: map[string]Artifact{}}
}

// UploadCreate implements Manifest. An ID already in progress is
// cikit.ErrConflict.
func (m *MemoryManifest) UploadCreate(ctx context.Context, u *PendingUpload) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkUpload(u); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.uploads[u.ID]; ok {
		return fmt.Errorf("artifacts: upload %q exists: %w", u.ID, cikit.ErrConflict)
	}
	m.uploads[u.ID] = storedUpload(*u)
	return nil
}

// UploadGet implements Manifest.
func (m *MemoryManifest) UploadGet(ctx context.Context, id string) (*PendingUpload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.uploads[id]
	if !ok {
		return nil, fmt.Errorf("artifacts: upload %q: %w", id, cikit.ErrNotFound)
	}
	return &u, nil
}

// UploadFinish implements Manifest.
func (m *MemoryManifest) UploadFinish(ctx context.Context, id string, a *Artifact, replace bool) (*Artifact, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkArtifact(a); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.uploads[id]; !ok || u.Aborted {
		return nil, fmt.Errorf("artifacts: upload %q is not in progress: %w", id, cikit.ErrNotFound)
	}
	if _, ok := m.artifacts[a.ID]; ok {
		return nil, fmt.Errorf("artifacts: artifact %q exists: %w", a.ID, cikit.ErrConflict)
	}
	var replaced *Artifact
	for _, old := range m.artifacts {
		if old.RunID == a.RunID && old.Name == a.Name {
			if !replace {
				return nil, fmt.Errorf("artifacts: run %s has an artifact named %q: %w", a.RunID, a.Name, ErrRefused)
			}
			replaced = &old
			delete(m.artifacts, old.ID)
			break
		}
	}
	delete(m.uploads, id)
	m.artifacts[a.ID] = storedArtifact(*a)
	return replaced, nil
}

// UploadDelete implements Manifest.
func (m *MemoryManifest) UploadDelete(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.uploads[id]
	delete(m.uploads, id)
	return ok, nil
}

// UploadAbort implements Manifest.
func (m *MemoryManifest) UploadAbort(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.uploads[id]
	if !ok || u.Aborted {
		return false, nil
	}
	u.Aborted = true
	m.uploads[id] = u
	return true, nil
}

// UploadsExpired implements Manifest.
func (m *MemoryManifest) UploadsExpired(ctx context.Context, t time.Time, limit int) ([]PendingUpload, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PendingUpload
	for _, u := range m.uploads {
		if u.ExpiresAt.Before(t) {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b PendingUpload) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(len(out), limit)], nil
}

// ArtifactsList implements Manifest.
func (m *MemoryManifest) ArtifactsList(ctx context.Context, f ArtifactFilter) ([]Artifact, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Artifact
	for _, a := range m.artifacts {
		if a.RunID == f.RunID && (len(f.JobIDs) == 0 || slices.Contains(f.JobIDs, a.JobID)) &&
			(f.Attempt <= 0 || a.Attempt == f.Attempt) && (f.Name == "" || a.Name == f.Name) && (f.Type == "" || a.Type == f.Type) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Artifact) int {
		return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// ArtifactsExpired implements Manifest. The latest run of a repository's
// default branch is the run of its default-branch artifact created last;
// of two created at once, the run whose ID sorts last.
func (m *MemoryManifest) ArtifactsExpired(ctx context.Context, t time.Time, limit int, keepLatestDefault bool) ([]Artifact, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	latest := map[string]Artifact{} // by repo: its latest default-branch artifact
	if keepLatestDefault {
		for _, a := range m.artifacts {
			if !a.DefaultBranch {
				continue
			}
			if l, ok := latest[a.Repo]; !ok || cmp.Or(a.CreatedAt.Compare(l.CreatedAt), cmp.Compare(a.RunID, l.RunID)) > 0 {
				latest[a.Repo] = a
			}
		}
	}
	var out []Artifact
	for _, a := range m.artifacts {
		if a.ExpiresAt.IsZero() || !a.ExpiresAt.Before(t) {
			continue
		}
		if l, ok := latest[a.Repo]; ok && l.RunID == a.RunID {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Artifact) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(len(out), limit)], nil
}

// ArtifactsDelete implements Manifest.
func (m *MemoryManifest) ArtifactsDelete(ctx context.Context, ids []string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var deleted []string
	for _, id := range ids {
		if _, ok := m.artifacts[id]; ok {
			delete(m.artifacts, id)
			deleted = append(deleted, id)
		}
	}
	return deleted, nil
}

// checkUpload refuses an upload either store could not keep.
func checkUpload(u *PendingUpload) error {
	if u == nil || u.ID == "" {
		return fmt.Errorf("artifacts: an upload needs an ID: %w", ErrRefused)
	}
	if err := checkName("the upload's name", u.Name); err != nil {
		return err
	}
	return checkTexts("the upload's ID", u.ID, "its repository", u.Repo, "its run ID", u.RunID, "its job ID", u.JobID,
		"its type", u.Type, "its report", u.Report, "its SHA-256", u.SHA256, "its scope", u.Scope,
		"its blob key", u.BlobKey, "its multipart ID", u.MultipartID)
}

// checkArtifact refuses an artifact either store could not keep.
func checkArtifact(a *Artifact) error {
	if a == nil || a.ID == "" || a.RunID == "" {
		return fmt.Errorf("artifacts: an artifact needs an ID and a run ID: %w", ErrRefused)
	}
	if err := checkName("the artifact's name", a.Name); err != nil {
		return err
	}
	return checkTexts("the artifact's ID", a.ID, "its repository", a.Repo, "its run ID", a.RunID, "its job ID", a.JobID,
		"its type", a.Type, "its report", a.Report, "its SHA-256", a.SHA256, "its blob key", a.BlobKey)
}

// checkFilter refuses a filter without a run.
func checkFilter(f ArtifactFilter) error {
	if f.RunID == "" {
		return fmt.Errorf("artifacts: an artifact filter needs a run ID: %w", ErrRefused)
	}
	return nil
}

// storedUpload is u as the stores keep it.
func storedUpload(u PendingUpload) PendingUpload {
	u.CreatedAt = storedTime(u.CreatedAt)
	u.ExpiresAt = storedTime(u.ExpiresAt)
	return u
}

// storedArtifact is a as the stores keep it: without the Download of an
// answer.
func storedArtifact(a Artifact) Artifact {
	a.CreatedAt = storedTime(a.CreatedAt)
	a.ExpiresAt = storedTime(a.ExpiresAt)
	a.Download = nil
	return a
}
