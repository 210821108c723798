package ingest

import (
	"cmp"
	"fmt"
	"net/http"
	"time"
)

// Header names of GitLab deliveries.
const (
	headerGitLabEvent     = "X-Gitlab-Event"
	headerGitLabEventUUID = "X-Gitlab-Event-UUID"
	headerGitLabRequestID = "X-Gitlab-Webhook-UUID"
	headerIdempotencyKey  = "Idempotency-Key"
)

// NormalizeGitLab turns a verified GitLab delivery into an Event, by the
// object_kind of its payload (so system hooks, which send the same
// payloads, work too):
//
//   - push: KindPush; a branch deletion is ignored.
//   - tag_push: KindTag; a tag deletion is ignored.
//   - merge_request: KindPullRequest for the actions open, update and
//     reopen; the others (close, merge, approved …) are ignored. PRNumber
//     is the iid, RefName the source branch, SHA its last commit, Before
//     the previous head when the update pushed commits, Fork whether the
//     source project is another one, EventTime the update time.
//     AuthorAssociation stays empty: GitLab's payload does not say how
//     the author is related to the project.
//   - every other kind is ignored.
//
// Org and Repo come from the project's path_with_namespace, split at its
// last slash, so subgroups stay in Org. For pushes, SHA is checkout_sha
// (the commit, also for an annotated tag), EventTime the time of that
// commit when the payload lists it, and Paths the files the listed
// commits touched when the payload lists all of them.
//
// DeliveryID is the Idempotency-Key header, which GitLab keeps when it
// retries a delivery, or, from GitLab versions without it, the
// X-Gitlab-Event-UUID, which every webhook set off by one chain of events
// shares (a push and the merge request update it causes may carry the
// same one). GitLab sends no id of the webhook itself (its
// X-Gitlab-Webhook-UUID is new for every request), so HookID holds the
// object kind instead, which scopes the delivery id: the push and the
// merge request of one chain are two deliveries, a retry of either one.
//
// A body that is not JSON, or lacks what its kind needs, is an error.
func NormalizeGitLab(wh *Webhook) (Normalized, error) {
	// The kind decides the shape of the rest: other kinds reuse field
	// names with other types (a pipeline's object_attributes.source is a
	// string), so only the kinds read here are decoded further.
	var head struct {
		ObjectKind string `json:"object_kind"`
	}
	if err := decodePayload(wh.Body, &head); err != nil {
		return Normalized{}, fmt.Errorf("gitlab: %w", err)
	}
	kind := head.ObjectKind
	var (
		ev      *Event
		ignored string
		err     error
	)
	switch kind {
	case "":
		return Normalized{}, fmt.Errorf("gitlab: no object_kind")
	case "push", "tag_push":
		ev, ignored, err = gitLabPush(wh.Body, wh.Received)
	case "merge_request":
		ev, ignored, err = gitLabMergeRequest(wh.Body)
	default:
		ignored = fmt.Sprintf("GitLab object_kind %q starts no pipeline", kind)
	}
	if err != nil {
		return Normalized{}, fmt.Errorf("gitlab %s: %w", kind, err)
	}
	if ignored != "" {
		return Normalized{Ignored: &Ignored{Event: kind, Reason: ignored}}, nil
	}
	ev.Provider, ev.HookID = GitLab, kind
	ev.DeliveryID = gitLabDeliveryID(wh.Header)
	if ev.DeliveryID == "" {
		return Normalized{}, fmt.Errorf("gitlab %s: no %s or %s header", kind, headerIdempotencyKey, headerGitLabEventUUID)
	}
	return finishEvent(ev, wh, "gitlab "+kind, false)
}

// gitLabDeliveryID returns the id of a GitLab delivery: the
// Idempotency-Key (which is also the webhook-id of a signed delivery), or
// the X-Gitlab-Event-UUID of GitLab versions that send no such key, or, as
// a last resort, the X-Gitlab-Webhook-UUID, which is new for every
// request, retries included.
func gitLabDeliveryID(h http.Header) string {
	return cmp.Or(
		h.Get(headerIdempotencyKey),
		h.Get(headerGitLabEventUUID),
		h.Get(headerWebhookID),
		h.Get(headerGitLabRequestID),
	)
}

type gitLabProject struct {
	ID                int64  `json:"id"`
	PathWithNamespace string `json:"path_with_namespace"`
	DefaultBranch     string `json:"default_branch"`
}

type gitLabCommit struct {
	ID        string   `json:"id"`
	Timestamp string   `json:"timestamp"`
	Added     []string `json:"added"`
	Modified  []string `json:"modified"`
	Removed   []string `json:"removed"`
}

// name splits the project's path_with_namespace at its last slash.
func (p *gitLabProject) name() (org, repo string, err error) {
	if p == nil {
		return "", "", fmt.Errorf("no project")
	}
	return splitRepoPath("project.path_with_namespace", p.PathWithNamespace)
}

func gitLabPush(body []byte, received time.Time) (*Event, string, error) {
	var p struct {
		Ref               string         `json:"ref"`
		Before            string         `json:"before"`
		After             string         `json:"after"`
		CheckoutSHA       string         `json:"checkout_sha"`
		UserUsername      string         `json:"user_username"`
		Project           *gitLabProject `json:"project"`
		Commits           []gitLabCommit `json:"commits"`
		TotalCommitsCount int            `json:"total_commits_count"`
	}
	if err := decodePayload(body, &p); err != nil {
		return nil, "", err
	}
	org, repo, err := p.Project.name()
	if err != nil {
		return nil, "", err
	}
	refType, refName, err := splitRef(p.Ref)
	if err != nil {
		return nil, "", err
	}
	if refType == "" {
		return nil, fmt.Sprintf("a push to %s, neither a branch nor a tag, starts no pipeline", p.Ref), nil
	}
	if isZeroSHA(p.After) {
		return nil, fmt.Sprintf("the %s %s was deleted", refType, refName), nil
	}
	ev := &Event{
		Kind:          KindPush,
		Org:           org,
		Repo:          repo,
		RefType:       refType,
		RefName:       refName,
		SHA:           cmp.Or(p.CheckoutSHA, p.After),
		Before:        p.Before,
		DefaultBranch: p.Project.DefaultBranch,
		Actor:         p.UserUsername,
		EventTime:     received,
	}
	if refType == RefTag {
		ev.Kind = KindTag
	}
	for _, c := range p.Commits {
		if c.ID == ev.SHA && c.Timestamp != "" {
			if ev.EventTime, err = parsePayloadTime("commits.timestamp", c.Timestamp); err != nil {
				return nil, "", err
			}
			break
		}
	}
	// GitLab lists at most 20 commits and counts all of them.
	if p.TotalCommitsCount <= len(p.Commits) {
		var lists [][]string
		for _, c := range p.Commits {
			lists = append(lists, c.Added, c.Modified, c.Removed)
		}
		ev.Paths = unionPaths(lists)
	}
	return ev, "", nil
}

// gitLabMR is the object_attributes of a merge_request payload.
type gitLabMR struct {
	Action          string         `json:"action"`
	IID             int            `json:"iid"`
	SourceBranch    string         `json:"source_branch"`
	TargetBranch    string         `json:"target_branch"`
	SourceProjectID int64          `json:"source_project_id"`
	TargetProjectID int64          `json:"target_project_id"`
	Source          *gitLabProject `json:"source"`
	Target          *gitLabProject `json:"target"`
	UpdatedAt       string         `json:"updated_at"`
	OldRev          string         `json:"oldrev"`
	LastCommit      *struct {
		ID string `json:"id"`
	} `json:"last_commit"`
}

func gitLabMergeRequest(body []byte) (*Event, string, error) {
	var p struct {
		User *struct {
			Username string `json:"username"`
		} `json:"user"`
		Project          *gitLabProject `json:"project"`
		ObjectAttributes *gitLabMR      `json:"object_attributes"`
	}
	if err := decodePayload(body, &p); err != nil {
		return nil, "", err
	}
	mr := p.ObjectAttributes
	if mr == nil {
		return nil, "", fmt.Errorf("no object_attributes")
	}
	switch mr.Action {
	case "open", "update", "reopen":
	case "":
		return nil, "", fmt.Errorf("no object_attributes.action")
	default:
		return nil, fmt.Sprintf("merge request action %q starts no pipeline", mr.Action), nil
	}
	org, repo, err := p.Project.name()
	if err != nil {
		return nil, "", err
	}
	if mr.IID <= 0 {
		return nil, "", fmt.Errorf("no object_attributes.iid")
	}
	if mr.SourceBranch == "" || mr.TargetBranch == "" || mr.LastCommit == nil || mr.LastCommit.ID == "" {
		return nil, "", fmt.Errorf("no source branch, target branch or last commit")
	}
	if mr.UpdatedAt == "" {
		return nil, "", fmt.Errorf("no object_attributes.updated_at")
	}
	updated, err := parsePayloadTime("object_attributes.updated_at", mr.UpdatedAt)
	if err != nil {
		return nil, "", err
	}
	ev := &Event{
		Kind:          KindPullRequest,
		Org:           org,
		Repo:          repo,
		RefType:       RefBranch,
		RefName:       mr.SourceBranch,
		SHA:           mr.LastCommit.ID,
		Before:        mr.OldRev,
		DefaultBranch: p.Project.DefaultBranch,
		Fork:          mr.fork(),
		PRNumber:      mr.IID,
		BaseRef:       mr.TargetBranch,
		EventTime:     updated,
	}
	if p.User != nil {
		ev.Actor = p.User.Username
	}
	return ev, "", nil
}

// fork reports whether the merge request's source project is another one
// than its target; when the payload does not say, it counts as one.
func (mr *gitLabMR) fork() bool {
	if mr.SourceProjectID != 0 && mr.TargetProjectID != 0 {
		return mr.SourceProjectID != mr.TargetProjectID
	}
	if mr.Source == nil || mr.Target == nil || mr.Source.PathWithNamespace == "" {
		return true
	}
	return mr.Source.PathWithNamespace != mr.Target.PathWithNamespace
}
