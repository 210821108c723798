package cikit

import (
	"encoding/json"
	"time"
)

// RunContext is what a run knows of the event that started it: the
// repository, the commit and ref it builds, who caused it and with what
// inputs. The platform records it with the run, and every job of the run
// sees it (as CIKIT_* variables, GitHub's github context and default
// variables, GitLab's predefined variables).
type RunContext struct {
	// Provider names the forge: "github", "gitlab", "local"; "manual"
	// for a run started through the API.
	Provider string `json:"provider,omitempty"`
	// Repository is the repository's full name, "acme/api" (GitLab
	// subgroups included, "acme/platform/api").
	Repository string `json:"repository,omitempty"`
	// RepositoryURL is the repository's web page, when known.
	RepositoryURL string `json:"repository_url,omitempty"`
	// Event names what started the run as the pipeline format knows it:
	// "push", "pull_request", "merge_request_event", "workflow_dispatch",
	// "web", "tag" …
	Event string `json:"event,omitempty"`
	// Ref is the full ref built ("refs/heads/main", "refs/tags/v1",
	// "refs/pull/7/merge"); RefName its short name ("main", "v1");
	// RefType "branch" or "tag".
	Ref     string `json:"ref,omitempty"`
	RefName string `json:"ref_name,omitempty"`
	RefType string `json:"ref_type,omitempty"`
	// SHA is the commit the run builds.
	SHA string `json:"sha,omitempty"`
	// BaseRef and HeadRef are a pull request's target and source
	// branches; PRNumber its number (GitLab's iid). Empty and 0 for
	// other events.
	BaseRef  string `json:"base_ref,omitempty"`
	HeadRef  string `json:"head_ref,omitempty"`
	PRNumber int    `json:"pr_number,omitempty"`
	// Fork says a pull request's head is in another repository: its
	// runs get a cache scope of their own that trusted branches never
	// read.
	Fork bool `json:"fork,omitempty"`
	// AuthorAssociation is how a pull request's author is related to the
	// repository, as GitHub says ("OWNER", "FIRST_TIME_CONTRIBUTOR" …);
	// empty for other events and where the forge does not say (GitLab).
	AuthorAssociation string `json:"author_association,omitempty"`
	// DefaultBranch is the repository's default branch, when known.
	DefaultBranch string `json:"default_branch,omitempty"`
	// Actor is who caused the event: the pusher, the person who started
	// the run.
	Actor string `json:"actor,omitempty"`
	// Inputs are a manual trigger's variables or a workflow_dispatch's
	// inputs, validated at the trigger (compiler.Plan.CheckInputs), with
	// the defaults of the declared inputs not given: as text, as GitHub's
	// github.event.inputs and GitLab's variables have them.
	Inputs map[string]string `json:"inputs,omitempty"`
	// InputTypes names the declared type of each input of Inputs that is
	// not text: "boolean" or "number". GitHub's inputs context has those
	// typed (inputs.flag is the boolean false, where
	// github.event.inputs.flag is the string "false"); TypedInputs gives
	// them so. Inputs without an entry are strings.
	InputTypes map[string]string `json:"input_types,omitempty"`
	// Payload is the event's payload as the forge sent it, JSON; GitHub
	// workflows read it at GITHUB_EVENT_PATH and as github.event. At
	// most MaxPayloadBytes.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// MaxPayloadBytes bounds RunContext.Payload. A larger payload is recorded
// as an empty object, and the run's event says so.
const MaxPayloadBytes = 1 << 20

// JobContext is what a runner is told about a job beyond its spec: the
// run's context, which attempt this is, the results and outputs of the
// jobs it needs, and where to fetch its commit from. The server builds it
// when the job is claimed.
type JobContext struct {
	RunContext
	// RunID is the run's ID; Attempt the attempt of the job being run,
	// from 1.
	RunID   string `json:"run_id"`
	Attempt int    `json:"attempt"`
	// RunNumber is the run's number among its pipeline's runs, from 1
	// (dag.Run.Number): GitHub's run_number, GitLab's CI_PIPELINE_IID.
	// Zero when the platform does not number runs; the runtime then
	// gives 1.
	RunNumber int64 `json:"run_number,omitempty"`
	// RunURL is the run's page on the platform, when the platform knows
	// its public URL.
	RunURL string `json:"run_url,omitempty"`
	// Needs are the jobs this one needs, by job ID, as they ended.
	Needs map[string]NeedResult `json:"needs,omitempty"`
	// Source is where the runner fetches the commit, with a credential
	// minted for this job; nil when the job runs without a repository
	// (a runner given a fixed directory, `cikit run` on a work tree).
	Source *CheckoutSource `json:"source,omitempty"`
}

// NeedResult is how a job that another needs ended.
type NeedResult struct {
	// Result is its final state: JobSucceeded, JobFailed, JobSkipped or
	// JobCancelled.
	Result JobState `json:"result"`
	// Outputs are its job outputs (JobSpec.Outputs, evaluated when it
	// ended).
	Outputs map[string]string `json:"outputs,omitempty"`
}

// CheckoutSource is a git remote the runner may fetch one job's commit
// from: the URL and a short-lived, job-scoped, read-only credential.
// The credential never reaches the job's steps, its environment or the
// workspace's .git/config.
type CheckoutSource struct {
	// URL is the remote's HTTP(S) URL, without credentials.
	URL string `json:"url"`
	// Username and Token are HTTP basic credentials for URL ("x-access-
	// token" and an installation token on GitHub, "gitlab-ci-token" and
	// a job token on GitLab, the job token on the embedded platform).
	// Empty for a remote that needs none.
	Username string `json:"username,omitempty"`
	Token    string `json:"token,omitempty"`
	// ExpiresAt is when the credential stops working; zero when unknown.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// String shows a source without its token.
func (s *CheckoutSource) String() string {
	if s == nil {
		return "<none>"
	}
	return s.URL
}

// Checkout is how a job's commit is put into its workspace: by the runner,
// outside the job's sandbox, before the first step (JobSpec.Checkout), or
// where a GitHub workflow's actions/checkout step runs.
type Checkout struct {
	// Strategy is "fetch" (the default: reuse the runner's copy of the
	// repository and fetch what is new), "clone" (a fresh copy) or "none"
	// (no checkout: the workspace starts empty), GitLab's GIT_STRATEGY.
	Strategy string `json:"strategy,omitempty"`
	// Depth is how many commits of history to fetch: 0 for the default
	// (1, a shallow fetch of the commit alone), -1 for all of it.
	Depth int `json:"depth,omitempty"`
	// Submodules is "" (none), "normal" or "recursive".
	Submodules string `json:"submodules,omitempty"`
	// Path is where in the workspace the commit goes; "" for its root.
	Path string `json:"path,omitempty"`
	// Ref, when set, is checked out instead of the run's commit: a SHA,
	// branch or tag (actions/checkout's ref).
	Ref string `json:"ref,omitempty"`
	// Repository, when set, is another repository the job's credential
	// may read ("acme/tools"), checked out instead of the run's.
	Repository string `json:"repository,omitempty"`
	// Clean removes untracked files before the checkout (actions/
	// checkout's clean, true there by default).
	Clean bool `json:"clean,omitempty"`
}

// Annotation is a message a job's step attached to its run: GitHub's
// ::error, ::warning and ::notice workflow commands.
type Annotation struct {
	// Level is "error", "warning" or "notice".
	Level   string `json:"level"`
	Message string `json:"message"`
	Title   string `json:"title,omitempty"`
	// File, Line, EndLine, Col and EndColumn locate it in the
	// repository, when the command said.
	File      string `json:"file,omitempty"`
	Line      int    `json:"line,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	Col       int    `json:"col,omitempty"`
	EndColumn int    `json:"end_column,omitempty"`
	// Step is the name of the step that wrote it.
	Step string `json:"step,omitempty"`
}

// MaxAnnotations bounds the annotations one job attaches; past it the
// runner keeps the first ones and says how many it dropped.
const MaxAnnotations = 100
