package ingest

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"unicode/utf8"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/compiler"
)

// RunContext is what the runs ev starts, of pipelines in format, record
// of it (dag.RunCreateParams.Context): the event named as the format
// names it (GitHub's event names for a GitHub workflow, GitLab's
// CI_PIPELINE_SOURCE values for a GitLab file, cikit's kinds otherwise),
// the ref as the format spells it, and the payload as received. A
// payload larger than cikit.MaxPayloadBytes, or one that is not valid
// JSON in UTF-8, is recorded as {}; note then says why, for the log, and
// is "" otherwise.
func RunContext(ev *Event, format compiler.Format) (rc *cikit.RunContext, note string) {
	rc = &cikit.RunContext{Provider: string(ev.Provider), Repository: ev.Org + "/" + ev.Repo, SHA: ev.SHA,
		RefName: ev.RefName, RefType: string(ev.RefType), DefaultBranch: ev.DefaultBranch, Actor: ev.Actor,
		PRNumber: ev.PRNumber}
	if ev.Org == "" {
		rc.Repository = ev.Repo
	}
	if len(ev.Variables) > 0 {
		rc.Inputs = maps.Clone(ev.Variables)
	}
	if ev.RefType == RefTag {
		rc.Ref = "refs/tags/" + ev.RefName
	} else {
		rc.Ref = "refs/heads/" + ev.RefName
	}
	if ev.Kind == KindPullRequest {
		rc.BaseRef, rc.HeadRef = ev.BaseRef, ev.RefName
	}
	switch format {
	case compiler.FormatGitHub:
		switch ev.Kind {
		case KindPush, KindTag:
			rc.Event = "push"
		case KindPullRequest:
			rc.Event = "pull_request"
			// GitHub builds a pull request's merge ref, and names it so.
			rc.Ref, rc.RefName, rc.RefType = "refs/pull/"+strconv.Itoa(ev.PRNumber)+"/merge", strconv.Itoa(ev.PRNumber)+"/merge", "branch"
		case KindDispatch:
			rc.Event = "workflow_dispatch"
		}
	case compiler.FormatGitLab:
		switch ev.Kind {
		case KindPush, KindTag:
			rc.Event = "push"
		case KindPullRequest:
			rc.Event = "merge_request_event"
		case KindDispatch:
			rc.Event = "web"
		}
		if s := ev.Variables["CI_PIPELINE_SOURCE"]; s != "" {
			rc.Event = s
		}
	default:
		rc.Event = string(ev.Kind)
	}
	switch {
	case len(ev.Raw) == 0:
	case len(ev.Raw) > cikit.MaxPayloadBytes:
		rc.Payload = json.RawMessage(`{}`)
		note = fmt.Sprintf("the event's payload is %d bytes, more than the %s a run records (cikit.MaxPayloadBytes): its jobs see {}",
			len(ev.Raw), cikit.FormatBytes(cikit.MaxPayloadBytes))
	case !utf8.Valid(ev.Raw) || !json.Valid(ev.Raw):
		rc.Payload = json.RawMessage(`{}`)
		note = "the event's payload is not JSON in UTF-8: its jobs see {}"
	default:
		rc.Payload = ev.Raw
	}
	return rc, note
}
