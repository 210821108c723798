package secrets

import (
	"time"
)

// Claims are the claims of a job's ID token, as clouds expect them
// (GitHub's names where GitHub has one). The Issuer fills them from an
// Identity; a Verifier returns them once the token checks out.
type Claims struct {
	// Registered claims. Subject is "repo:OWNER/NAME:environment:ENV"
	// for a job of an environment, "repo:OWNER/NAME:pull_request" for a
	// pull request's, else "repo:OWNER/NAME:ref:REF" (Subject).
	Issuer    string    `json:"iss"`
	Subject   string    `json:"sub"`
	Audience  []string  `json:"aud"`
	IssuedAt  time.Time `json:"iat"`
	NotBefore time.Time `json:"nbf"`
	Expiry    time.Time `json:"exp"`
	ID        string    `json:"jti"`

	Repository      string `json:"repository"`       // "acme/api"
	RepositoryOwner string `json:"repository_owner"` // "acme"
	Ref             string `json:"ref"`              // "refs/heads/main"
	RefType         string `json:"ref_type"`         // "branch", "tag"
	SHA             string `json:"sha"`
	Environment     string `json:"environment,omitempty"`
	EventName       string `json:"event_name"` // "push", "pull_request" …
	Actor           string `json:"actor,omitempty"`
	HeadRef         string `json:"head_ref,omitempty"`
	BaseRef         string `json:"base_ref,omitempty"`
	// Fork says the run is a pull request's from a fork: its jobs get
	// no secrets.
	Fork       bool   `json:"fork,omitempty"`
	RunID      string `json:"run_id"`
	RunAttempt string `json:"run_attempt"`
	JobID      string `json:"job_id"`
	// RunnerEnvironment is "self-hosted" for a runner the platform's
	// users run, "cikit-hosted" for one the platform runs.
	RunnerEnvironment string `json:"runner_environment"`
}

// Identity is what the platform knows of a job when it mints the job's
// ID token: Claims without the registered claims, which the Issuer sets.
type Identity struct {
	Repository        string
	RepositoryOwner   string // default: Repository up to its last "/"
	Ref, RefType, SHA string
	Environment       string
	EventName         string
	Actor             string
	HeadRef, BaseRef  string
	Fork              bool
	PullRequest       bool // the run builds a pull or merge request
	RunID             string
	RunAttempt        int
	JobID             string
	RunnerEnvironment string
}
