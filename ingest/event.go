package ingest

import (
	"context"
	"encoding/json"
	"time"
)

// Provider names the system that sent a webhook.
type Provider string

// Providers.
const (
	GitHub Provider = "github"
	GitLab Provider = "gitlab"
	// Manual is a pipeline started by a person or a program through the
	// API rather than by a push.
	Manual Provider = "manual"
)

// Kind is what happened, in provider-neutral terms.
type Kind string

// Kinds.
const (
	KindPush        Kind = "push"         // commits pushed to a branch
	KindTag         Kind = "tag"          // a tag created or moved
	KindPullRequest Kind = "pull_request" // a PR/MR opened, updated or reopened
	KindDispatch    Kind = "dispatch"     // a manual or API trigger (workflow_dispatch, the pipelines API)
)

// RefType says whether RefName is a branch or a tag.
type RefType string

// Ref types.
const (
	RefBranch RefType = "branch"
	RefTag    RefType = "tag"
)

// Event is a webhook delivery normalized across providers: what the rest
// of the platform needs to decide which pipelines run, and nothing it
// must not trust. It is the value on the Kafka topic cikit.vcs-events,
// as JSON.
type Event struct {
	Provider Provider `json:"provider"`
	// DeliveryID is the provider's id of this delivery (GitHub's
	// X-GitHub-Delivery; GitLab's Idempotency-Key, else its
	// X-Gitlab-Event-UUID; Standard Webhooks' webhook-id); a redelivery
	// repeats it.
	DeliveryID string `json:"delivery_id"`
	// HookID scopes DeliveryID: the webhook configuration that sent it
	// (GitHub's X-GitHub-Hook-ID), or for GitLab, which sends no stable
	// id of its webhooks, the payload's object kind; for a
	// ManualTrigger, "api:" and the repository, which scopes its
	// Idempotency-Key to the repository.
	HookID string `json:"hook_id,omitempty"`
	Kind   Kind   `json:"kind"`
	// Org and Repo name the repository: "acme" and "api" for acme/api.
	// GitLab subgroups stay in Org ("acme/platform").
	Org  string `json:"org"`
	Repo string `json:"repo"`
	// RefType and RefName name what was built: a branch or a tag. For a
	// pull request, the head branch.
	RefType RefType `json:"ref_type"`
	RefName string  `json:"ref_name"`
	// SHA is the commit to build: the pushed head, a tag's commit, a pull
	// request's head (MergeSHA is its test merge commit, when known). A
	// created tag or a dispatch may name only a ref: the Ingester then
	// builds the ref's commit.
	SHA      string `json:"sha"`
	MergeSHA string `json:"merge_sha,omitempty"`
	// Before is the ref's previous commit for a push, all zeros for a new
	// ref.
	Before string `json:"before,omitempty"`
	// DefaultBranch is the repository's default branch, when the payload
	// says.
	DefaultBranch string `json:"default_branch,omitempty"`
	// Actor is who caused the event: the pusher, the PR's updater.
	Actor string `json:"actor,omitempty"`
	// Fork is true for a pull request from another repository, which gets
	// no secrets.
	Fork bool `json:"fork,omitempty"`
	// AuthorAssociation is how the author of a pull request is related
	// to the repository, as GitHub's pull_request.author_association
	// says: "OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR",
	// "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER" or "NONE". A policy reads
	// it to hold the pull requests of newcomers. Empty for other kinds,
	// for GitLab (whose merge request payload has no such field) and
	// when the payload's value is not one word of at most
	// MaxAuthorAssociationBytes capital letters and underscores.
	AuthorAssociation string `json:"author_association,omitempty"`
	// PRNumber is the pull or merge request's number (GitLab's iid), 0
	// for other kinds; BaseRef its target branch.
	PRNumber int    `json:"pr_number,omitempty"`
	BaseRef  string `json:"base_ref,omitempty"`
	// Paths lists the files the payload says changed, for path filters;
	// nil when it does not say (then a provider is asked).
	Paths []string `json:"paths,omitempty"`
	// Variables are a dispatch's inputs.
	Variables map[string]string `json:"variables,omitempty"`
	// Pipeline, when set, is the one pipeline file a dispatch starts
	// (GitHub's workflow_dispatch names its workflow; a manual trigger
	// may): the repository's other pipelines do not run. A path
	// IsPipelineFile accepts.
	Pipeline string `json:"pipeline,omitempty"`
	// EventTime is when the provider says the event happened: the head
	// commit's time for a push, the update time of a pull request.
	// Events older than what is known of their ref are dropped.
	EventTime time.Time `json:"event_time"`
	// Raw is the verified body as received.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// MaxAuthorAssociationBytes bounds Event.AuthorAssociation.
const MaxAuthorAssociationBytes = 32

// authorAssociation returns s when it can be a GitHub author association
// (at most MaxAuthorAssociationBytes of A-Z and _), else "": the value
// comes from the sender and a policy compares it, so anything else is
// dropped rather than passed on.
func authorAssociation(s string) string {
	if len(s) > MaxAuthorAssociationBytes {
		return ""
	}
	for i := range len(s) {
		if c := s[i]; (c < 'A' || c > 'Z') && c != '_' {
			return ""
		}
	}
	return s
}

// Key is the Kafka partition key of the event: "org/repo/refType/refName",
// so that the events of one ref are processed in order.
func (e *Event) Key() string {
	return e.Org + "/" + e.Repo + "/" + string(e.RefType) + "/" + e.RefName
}

// Publisher hands a verified event to the rest of the platform. Publish
// returns only once the event is durable (the broker acknowledged it); the
// receiver answers the provider after that, so an error means the
// provider will retry; except an error matching ErrEventTooLarge, which
// says the event can never be published and is answered 413.
type Publisher interface {
	Publish(ctx context.Context, ev *Event) error
}
