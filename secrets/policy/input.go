package policy

import (
	"errors"
	"fmt"

	"github.com/cikit/cikit"
)

// Input is what the policy is asked about: one job of a run being
// created, and the event that created it. It is the Rego input document;
// its JSON names are what a policy reads (input.fork, input.job.environment).
type Input struct {
	// Event is the kind of event: "push", "tag", "pull_request",
	// "dispatch" (a manual run), "schedule".
	Event string `json:"event"`
	// Repository is "org/repo" (GitLab subgroups keep their path).
	Repository string `json:"repository"`
	// Ref is what is built; for a pull request its head branch.
	Ref Ref `json:"ref"`
	// Actor is who caused the event (the pusher, the pull request's
	// author or updater, who triggered the run).
	Actor string `json:"actor"`
	// PullRequest is the pull request's (GitLab: merge request's)
	// number, 0 for an event that is none.
	PullRequest int `json:"pull_request"`
	// Fork says a pull request comes from another repository.
	Fork bool `json:"fork"`
	// AuthorAssociation is GitHub's author_association of the pull
	// request's author ("OWNER", "MEMBER", "COLLABORATOR",
	// "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "NONE");
	// empty when the forge does not say (GitLab).
	AuthorAssociation string `json:"author_association"`
	// FirstTimeContributor says the author has no commit in the
	// repository yet: GitHub's FIRST_TIME_CONTRIBUTOR or FIRST_TIMER.
	FirstTimeContributor bool `json:"first_time_contributor"`
	// ChangedFiles are the files the event changed, when known (at most
	// MaxChangedFiles; ChangedFilesTruncated says more were cut).
	ChangedFiles          []string `json:"changed_files"`
	ChangedFilesTruncated bool     `json:"changed_files_truncated,omitempty"`
	// PipelineFileChanged says the event changes a pipeline file (the
	// run's own, or any other the forge reads pipelines from), or that
	// the changed files are not known: a fork that edits the pipeline
	// runs code nobody reviewed.
	PipelineFileChanged bool `json:"pipeline_file_changed"`
	// Pipeline is the run's pipeline file (".gitlab-ci.yml").
	Pipeline string `json:"pipeline"`
	// Job is the job being decided on.
	Job Job `json:"job"`
}

// MaxChangedFiles bounds Input.ChangedFiles.
const MaxChangedFiles = 3000

// Ref is a git ref and what the platform knows of it.
type Ref struct {
	Type string `json:"type"` // "branch" or "tag"
	Name string `json:"name"` // "main", "v1.2.0"
	// Protected says the platform's configuration protects the ref (the
	// default branch always is).
	Protected bool `json:"protected"`
	// Default says it is the repository's default branch.
	Default bool `json:"default"`
	// Base is a pull request's target branch.
	Base string `json:"base,omitempty"`
}

// Job is the part of a job a policy decides on.
type Job struct {
	ID string `json:"id"`
	// Environment is the deployment environment's name, "" for none.
	Environment string `json:"environment"`
	// Secrets are the names of the secrets the job asks for.
	Secrets []string `json:"secrets"`
	// Permissions are the job's token permissions as written (scope →
	// "read", "write", "none"); "id-token": "write" asks for OIDC tokens.
	Permissions map[string]string `json:"permissions"`
	// RunsOn are the runner labels the job asks for.
	RunsOn []string `json:"runs_on"`
	// DefaultSecretsScopes are the scopes the job would read from
	// without a policy (environment, repository, owner and groups),
	// DefaultCacheScope the cache scope it would write.
	DefaultSecretsScopes []string `json:"default_secrets_scopes"`
	DefaultCacheScope    string   `json:"default_cache_scope"`
}

// JobOf fills the job part of an input from a job's spec; the default
// scopes are the caller's to set.
func JobOf(spec *cikit.JobSpec) Job {
	j := Job{ID: spec.ID, Secrets: spec.Secrets, Permissions: spec.Permissions, RunsOn: spec.RunsOn}
	if spec.Environment != nil {
		j.Environment = spec.Environment.Name
	}
	if j.Secrets == nil {
		j.Secrets = []string{}
	}
	if j.Permissions == nil {
		j.Permissions = map[string]string{}
	}
	if j.RunsOn == nil {
		j.RunsOn = []string{}
	}
	return j
}

// Bounds of an Input, which Eval checks (Validate) before a policy sees
// it: an event from a forge is outside input.
const (
	// MaxInputTextBytes bounds each string of an Input.
	MaxInputTextBytes = 4096
	// MaxJobListLen bounds Job.Secrets, Job.Permissions, Job.RunsOn and
	// Job.DefaultSecretsScopes.
	MaxJobListLen = 256
)

// Validate reports whether in is within the bounds of an Input
// (MaxChangedFiles, MaxInputTextBytes, MaxJobListLen); the error names
// the field.
func (in *Input) Validate() error {
	if in == nil {
		return errors.New("policy input is nil")
	}
	texts := []struct{ field, s string }{
		{"event", in.Event}, {"repository", in.Repository}, {"actor", in.Actor},
		{"author_association", in.AuthorAssociation}, {"pipeline", in.Pipeline},
		{"ref.type", in.Ref.Type}, {"ref.name", in.Ref.Name}, {"ref.base", in.Ref.Base},
		{"job.id", in.Job.ID}, {"job.environment", in.Job.Environment},
		{"job.default_cache_scope", in.Job.DefaultCacheScope},
	}
	for _, t := range texts {
		if len(t.s) > MaxInputTextBytes {
			return fmt.Errorf("policy input: %s is %d bytes, more than %d", t.field, len(t.s), MaxInputTextBytes)
		}
	}
	if in.PullRequest < 0 {
		return fmt.Errorf("policy input: pull_request is %d; a pull request's number is positive, 0 for none", in.PullRequest)
	}
	if len(in.ChangedFiles) > MaxChangedFiles {
		return fmt.Errorf("policy input: changed_files has %d files, more than %d (cut the list and set changed_files_truncated)", len(in.ChangedFiles), MaxChangedFiles)
	}
	lists := []struct {
		field string
		l     []string
		max   int
	}{
		{"changed_files", in.ChangedFiles, MaxChangedFiles},
		{"job.secrets", in.Job.Secrets, MaxJobListLen},
		{"job.runs_on", in.Job.RunsOn, MaxJobListLen},
		{"job.default_secrets_scopes", in.Job.DefaultSecretsScopes, MaxJobListLen},
	}
	for _, l := range lists {
		if len(l.l) > l.max {
			return fmt.Errorf("policy input: %s has %d entries, more than %d", l.field, len(l.l), l.max)
		}
		for i, s := range l.l {
			if len(s) > MaxInputTextBytes {
				return fmt.Errorf("policy input: %s[%d] is %d bytes, more than %d", l.field, i, len(s), MaxInputTextBytes)
			}
		}
	}
	if len(in.Job.Permissions) > MaxJobListLen {
		return fmt.Errorf("policy input: job.permissions has %d scopes, more than %d", len(in.Job.Permissions), MaxJobListLen)
	}
	for k, v := range in.Job.Permissions {
		if len(k) > MaxInputTextBytes || len(v) > MaxInputTextBytes {
			return fmt.Errorf("policy input: job.permissions has a scope or level longer than %d bytes", MaxInputTextBytes)
		}
	}
	return nil
}
