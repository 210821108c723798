package ingest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Header names of GitHub deliveries.
const (
	headerGitHubEvent    = "X-GitHub-Event"
	headerGitHubDelivery = "X-GitHub-Delivery"
	headerGitHubHookID   = "X-GitHub-Hook-ID"
)

// gitHubMaxPushCommits is the most commits a GitHub push payload lists;
// a push of more is truncated, and its files are not all named.
const gitHubMaxPushCommits = 2048

// NormalizeGitHub turns a verified GitHub delivery into an Event, by the
// event named in its X-GitHub-Event header:
//
//   - push: KindPush for a branch, KindTag for a tag; a deletion is
//     ignored. SHA is the pushed commit (for an annotated tag, the commit
//     it points at), EventTime the head commit's time, Paths the files
//     the listed commits touched.
//   - pull_request: KindPullRequest for the actions opened, synchronize
//     and reopened; the others are ignored. RefName is the head branch,
//     SHA the head commit, MergeSHA the test merge commit when GitHub has
//     made one, Fork whether the head is in another repository,
//     AuthorAssociation the author's pull_request.author_association
//     (dropped when it is not a bounded word of A-Z and _), EventTime
//     the pull request's update time.
//   - create: KindTag for a tag; a branch creation is ignored, as its
//     push event builds it.
//   - workflow_dispatch: KindDispatch with the inputs as Variables.
//   - ping and every other event are ignored.
//
// The create and workflow_dispatch payloads name no commit, so their SHA
// is empty and the consumer resolves RefName at the provider; their
// EventTime is the time the delivery was received.
//
// A body that is not JSON, or lacks what its event needs (the repository,
// the ref, the commit), is an error: the sender should be told 400.
func NormalizeGitHub(wh *Webhook) (Normalized, error) {
	event := wh.Header.Get(headerGitHubEvent)
	var n gitHubNormalizer
	switch event {
	case "":
		return Normalized{}, fmt.Errorf("github: no %s header", headerGitHubEvent)
	case "push":
		n = gitHubPush
	case "pull_request":
		n = gitHubPullRequest
	case "create":
		n = gitHubCreate
	case "workflow_dispatch":
		n = gitHubDispatch
	case "ping":
		return gitHubIgnore(wh, event, "a ping only checks that the webhook is reachable")
	default:
		return gitHubIgnore(wh, event, fmt.Sprintf("GitHub event %q starts no pipeline", event))
	}
	ev, ignored, err := n(wh.Body, wh.Received)
	if err != nil {
		return Normalized{}, fmt.Errorf("github %s: %w", event, err)
	}
	if ignored != "" {
		return Normalized{Ignored: &Ignored{Event: event, Reason: ignored}}, nil
	}
	ev.Provider = GitHub
	ev.DeliveryID = wh.Header.Get(headerGitHubDelivery)
	ev.HookID = wh.Header.Get(headerGitHubHookID)
	if ev.DeliveryID == "" {
		return Normalized{}, fmt.Errorf("github %s: no %s header", event, headerGitHubDelivery)
	}
	return finishEvent(ev, wh, "github "+event, event == "create" || event == "workflow_dispatch")
}

// A gitHubNormalizer reads the payload of one GitHub event. It returns an
// event, or the reason the payload starts no pipeline, or an error for a
// malformed payload; received is the time of the delivery.
type gitHubNormalizer func(body []byte, received time.Time) (ev *Event, ignored string, err error)

// gitHubIgnore ignores a delivery whose payload is not read, once it is
// known to be JSON.
func gitHubIgnore(wh *Webhook, event, reason string) (Normalized, error) {
	if !json.Valid(wh.Body) {
		return Normalized{}, fmt.Errorf("github %s: malformed JSON", event)
	}
	return Normalized{Ignored: &Ignored{Event: event, Reason: reason}}, nil
}

// The parts of GitHub payloads the normalizers read.
type (
	gitHubRepository struct {
		ID            int64  `json:"id"`
		Name          string `json:"name"`
		FullName      string `json:"full_name"`
		DefaultBranch string `json:"default_branch"`
		Owner         struct {
			Login string `json:"login"`
		} `json:"owner"`
	}
	gitHubUser struct {
		Login string `json:"login"`
	}
	gitHubCommit struct {
		ID        string   `json:"id"`
		Timestamp string   `json:"timestamp"`
		Added     []string `json:"added"`
		Removed   []string `json:"removed"`
		Modified  []string `json:"modified"`
	}
	gitHubBranch struct {
		Ref  string            `json:"ref"`
		SHA  string            `json:"sha"`
		Repo *gitHubRepository `json:"repo"`
	}
)

// name returns the repository's org and name, or an error when the
// payload has no repository.
func (r *gitHubRepository) name() (org, repo string, err error) {
	if r == nil || r.Owner.Login == "" || r.Name == "" {
		return "", "", fmt.Errorf("no repository owner and name")
	}
	return r.Owner.Login, r.Name, nil
}

func (u *gitHubUser) login() string {
	if u == nil {
		return ""
	}
	return u.Login
}

func gitHubPush(body []byte, received time.Time) (*Event, string, error) {
	var p struct {
		Ref        string            `json:"ref"`
		Before     string            `json:"before"`
		After      string            `json:"after"`
		Deleted    bool              `json:"deleted"`
		HeadCommit *gitHubCommit     `json:"head_commit"`
		Commits    []gitHubCommit    `json:"commits"`
		Repository *gitHubRepository `json:"repository"`
		Sender     *gitHubUser       `json:"sender"`
		Pusher     *struct {
			Name string `json:"name"`
		} `json:"pusher"`
	}
	if err := decodePayload(body, &p); err != nil {
		return nil, "", err
	}
	org, repo, err := p.Repository.name()
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
	if p.Deleted || isZeroSHA(p.After) {
		return nil, fmt.Sprintf("the %s %s was deleted", refType, refName), nil
	}
	ev := &Event{
		Kind:          KindPush,
		Org:           org,
		Repo:          repo,
		RefType:       refType,
		RefName:       refName,
		SHA:           p.After,
		Before:        p.Before,
		DefaultBranch: p.Repository.DefaultBranch,
		Actor:         p.Sender.login(),
		EventTime:     received,
	}
	if ev.Actor == "" && p.Pusher != nil {
		ev.Actor = p.Pusher.Name
	}
	if refType == RefTag {
		ev.Kind = KindTag
		// after is the tag object of an annotated tag; head_commit is
		// the commit it points at.
		if p.HeadCommit != nil && p.HeadCommit.ID != "" {
			ev.SHA = p.HeadCommit.ID
		}
	}
	if p.HeadCommit != nil && p.HeadCommit.Timestamp != "" {
		if ev.EventTime, err = parsePayloadTime("head_commit.timestamp", p.HeadCommit.Timestamp); err != nil {
			return nil, "", err
		}
	}
	if len(p.Commits) < gitHubMaxPushCommits {
		var lists [][]string
		for _, c := range p.Commits {
			lists = append(lists, c.Added, c.Modified, c.Removed)
		}
		ev.Paths = unionPaths(lists)
	}
	return ev, "", nil
}

func gitHubPullRequest(body []byte, _ time.Time) (*Event, string, error) {
	var p struct {
		Action      string `json:"action"`
		Number      int    `json:"number"`
		Before      string `json:"before"`
		PullRequest *struct {
			Number         int    `json:"number"`
			UpdatedAt      string `json:"updated_at"`
			MergeCommitSHA string `json:"merge_commit_sha"`
			// AuthorAssociation is decoded as any JSON value, so that
			// a value of another type is dropped, not a malformed
			// payload.
			AuthorAssociation json.RawMessage `json:"author_association"`
			Head              gitHubBranch    `json:"head"`
			Base              gitHubBranch    `json:"base"`
		} `json:"pull_request"`
		Repository *gitHubRepository `json:"repository"`
		Sender     *gitHubUser       `json:"sender"`
	}
	if err := decodePayload(body, &p); err != nil {
		return nil, "", err
	}
	switch p.Action {
	case "opened", "synchronize", "reopened":
	case "":
		return nil, "", fmt.Errorf("no action")
	default:
		return nil, fmt.Sprintf("pull request action %q starts no pipeline", p.Action), nil
	}
	org, repo, err := p.Repository.name()
	if err != nil {
		return nil, "", err
	}
	pr := p.PullRequest
	if pr == nil {
		return nil, "", fmt.Errorf("no pull_request")
	}
	number := cmp.Or(pr.Number, p.Number)
	if number <= 0 {
		return nil, "", fmt.Errorf("no pull request number")
	}
	if pr.Head.Ref == "" || pr.Head.SHA == "" || pr.Base.Ref == "" {
		return nil, "", fmt.Errorf("no head ref, head sha or base ref")
	}
	if pr.UpdatedAt == "" {
		return nil, "", fmt.Errorf("no pull_request.updated_at")
	}
	updated, err := parsePayloadTime("pull_request.updated_at", pr.UpdatedAt)
	if err != nil {
		return nil, "", err
	}
	ev := &Event{
		Kind:          KindPullRequest,
		Org:           org,
		Repo:          repo,
		RefType:       RefBranch,
		RefName:       pr.Head.Ref,
		SHA:           pr.Head.SHA,
		MergeSHA:      pr.MergeCommitSHA,
		DefaultBranch: p.Repository.DefaultBranch,
		Actor:         p.Sender.login(),
		Fork:          gitHubFork(pr.Head.Repo, pr.Base.Repo, p.Repository),
		PRNumber:      number,
		BaseRef:       pr.Base.Ref,
		EventTime:     updated,
	}
	var assoc string
	if json.Unmarshal(pr.AuthorAssociation, &assoc) == nil {
		ev.AuthorAssociation = authorAssociation(assoc)
	}
	if p.Action == "synchronize" {
		ev.Before = p.Before
	}
	return ev, "", nil
}

// gitHubFork reports whether a pull request's head is in another
// repository than its base. A head repository that is gone (a deleted
// fork) counts as another one: it is not known to be trusted.
func gitHubFork(head, base, repository *gitHubRepository) bool {
	if base == nil {
		base = repository
	}
	if head == nil || base == nil {
		return true
	}
	if head.ID != 0 && base.ID != 0 {
		return head.ID != base.ID
	}
	return head.FullName == "" || !strings.EqualFold(head.FullName, base.FullName)
}

func gitHubCreate(body []byte, received time.Time) (*Event, string, error) {
	var p struct {
		Ref          string            `json:"ref"`
		RefType      string            `json:"ref_type"`
		MasterBranch string            `json:"master_branch"`
		Repository   *gitHubRepository `json:"repository"`
		Sender       *gitHubUser       `json:"sender"`
	}
	if err := decodePayload(body, &p); err != nil {
		return nil, "", err
	}
	switch p.RefType {
	case "tag":
	case "branch":
		return nil, "a branch creation starts no pipeline: its push event does", nil
	case "":
		return nil, "", fmt.Errorf("no ref_type")
	default:
		return nil, fmt.Sprintf("creating a %s starts no pipeline", p.RefType), nil
	}
	org, repo, err := p.Repository.name()
	if err != nil {
		return nil, "", err
	}
	if p.Ref == "" {
		return nil, "", fmt.Errorf("no ref")
	}
	return &Event{
		Kind:          KindTag,
		Org:           org,
		Repo:          repo,
		RefType:       RefTag,
		RefName:       p.Ref,
		DefaultBranch: cmp.Or(p.Repository.DefaultBranch, p.MasterBranch),
		Actor:         p.Sender.login(),
		EventTime:     received,
	}, "", nil
}

func gitHubDispatch(body []byte, received time.Time) (*Event, string, error) {
	var p struct {
		Ref        string                     `json:"ref"`
		Workflow   string                     `json:"workflow"`
		Inputs     map[string]json.RawMessage `json:"inputs"`
		Repository *gitHubRepository          `json:"repository"`
		Sender     *gitHubUser                `json:"sender"`
	}
	if err := decodePayload(body, &p); err != nil {
		return nil, "", err
	}
	if p.Workflow != "" && !IsPipelineFile(p.Workflow) {
		return nil, "", fmt.Errorf("workflow %.100q is not a workflow file (.github/workflows/*.yml)", p.Workflow)
	}
	org, repo, err := p.Repository.name()
	if err != nil {
		return nil, "", err
	}
	refType, refName, err := splitRef(p.Ref)
	if err != nil {
		return nil, "", err
	}
	if refType == "" {
		return nil, "", fmt.Errorf("ref %q is neither a branch nor a tag", p.Ref)
	}
	vars, err := inputValues(p.Inputs)
	if err != nil {
		return nil, "", err
	}
	return &Event{
		Kind:          KindDispatch,
		Org:           org,
		Repo:          repo,
		RefType:       refType,
		RefName:       refName,
		DefaultBranch: p.Repository.DefaultBranch,
		Actor:         p.Sender.login(),
		Variables:     vars,
		Pipeline:      p.Workflow,
		EventTime:     received,
	}, "", nil
}

// inputValues turns workflow_dispatch inputs into variables: strings as
// they are, other values (booleans, numbers) as their JSON text, null as
// the empty string.
func inputValues(inputs map[string]json.RawMessage) (map[string]string, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	vars := make(map[string]string, len(inputs))
	for name, raw := range inputs {
		var s string
		switch {
		case string(raw) == "null":
		case len(raw) > 0 && raw[0] == '"':
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("input %q: %w", name, err)
			}
		default:
			s = string(raw)
		}
		vars[name] = s
	}
	return vars, nil
}
