package dag

import (
	"fmt"
	"strings"
	"time"

	"github.com/cikit/cikit"
)

// Reasons of the jobs that a policy or a person kept from running (class
// cikit.FailurePolicy) start with one of these prefixes, so that people
// and programs can tell them apart.
const (
	// ReasonDenied starts the reason of a job the platform's policy
	// denied (cikit.DecisionDeny): FAILED as its run is created.
	ReasonDenied = "denied by policy: "
	// ReasonApprovalExpired starts the reason of a gated job nobody
	// approved in time (see ExpireParams.GateTimeout).
	ReasonApprovalExpired = "approval expired: "
	// ReasonRejected starts the reasons the API gives to EventReject:
	// "rejected by alice: not today".
	ReasonRejected = "rejected by "
)

// GateWaiting is the sentence that says what a gated job waits for, as
// the "job.manual" outbox event and the job's Reason carry it while it
// waits MANUAL, and as commit statuses show it: "waiting for approval by
// alice, bob: deployment to production" — the gate's reviewers, or "a
// person with the approve role" when it names none, then its reasons
// joined with "; ". It returns "" for a nil gate.
func GateWaiting(g *cikit.Gate) string {
	if g == nil {
		return ""
	}
	who := "a person with the approve role"
	if len(g.Reviewers) > 0 {
		who = strings.Join(g.Reviewers, ", ")
	}
	s := "waiting for approval by " + who
	if len(g.Reasons) > 0 {
		s += ": " + strings.Join(g.Reasons, "; ")
	}
	return s
}

// denied reports whether the platform's policy denied the job of spec.
func denied(spec *cikit.JobSpec) bool {
	return spec.Admission != nil && spec.Admission.Decision == cikit.DecisionDeny
}

// deniedReason is the reason of a job its policy denied.
func deniedReason(spec *cikit.JobSpec) string {
	return ReasonDenied + spec.Admission.Reason
}

// approvalDelay is how long a gated job of spec waits DELAYED once it is
// approved: its gate's WaitTimer, then, for a job of When delayed, its
// StartIn. A job that is no gated one waits its StartIn alone.
func approvalDelay(spec *cikit.JobSpec) time.Duration {
	var d time.Duration
	if spec.When == cikit.WhenDelayed {
		d = spec.StartIn
	}
	if spec.Gate != nil {
		d += spec.Gate.WaitTimer
	}
	return d
}

// gateExpiry returns why a gated job waiting MANUAL since since is past
// the time its gate waits for an approval at now — its Expires, or
// timeout (ExpireParams.GateTimeout) when it sets none — or "" when it
// is not, or waits without a limit.
func gateExpiry(g *cikit.Gate, since, now time.Time, timeout time.Duration) string {
	if g == nil {
		return ""
	}
	limit := g.Expires
	if limit <= 0 {
		limit = timeout
	}
	if limit <= 0 || !since.Add(limit).Before(now) {
		return ""
	}
	return fmt.Sprintf("%snobody approved within %s", ReasonApprovalExpired, limit)
}
