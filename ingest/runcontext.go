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
		rc.BaseRef, rc.HeadRef, rc.Fork = ev.BaseRef, ev.RefName, ev.Fork
		rc.AuthorAssociation = ev.AuthorAssociation
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

// withInputs records a dispatch's inputs, as the pipeline took them
// (defaults filled in, booleans and numbers typed), in rc. A GitHub
// workflow whose event has no payload (cikit's manual trigger) gets the
// one GitHub gives a workflow_dispatch, its inputs as text
// (github.event.inputs); when that is larger than cikit.MaxPayloadBytes
// the payload is {}, and note says so, for the log.
func withInputs(rc *cikit.RunContext, in compiler.InputValues, format compiler.Format) (note string) {
	rc.Inputs, rc.InputTypes = in.Values, in.Types
	if format != compiler.FormatGitHub || len(rc.Payload) > 0 {
		return ""
	}
	inputs := in.Values
	if inputs == nil {
		inputs = map[string]string{}
	}
	b, err := json.Marshal(map[string]any{"inputs": inputs, "ref": rc.Ref})
	if err != nil || len(b) > cikit.MaxPayloadBytes {
		rc.Payload = json.RawMessage(`{}`)
		return fmt.Sprintf("the inputs make a workflow_dispatch payload of %d bytes, more than the %s a run records (cikit.MaxPayloadBytes): github.event is {}",
			len(b), cikit.FormatBytes(cikit.MaxPayloadBytes))
	}
	rc.Payload = b
	return ""
}
