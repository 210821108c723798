package web_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/reference/web/webtest"
)

// gatedRun stores build → deploy-prod, where deploy-prod is held for
// alice's approval as the policy decided, and lets build succeed, so that
// deploy-prod waits MANUAL. Until the dag holds gated jobs on its own,
// deploy-prod is also when: manual.
func gatedRun(f *platform) string {
	run := f.create("acme/api:.cikit.yml",
		&cikit.JobSpec{ID: "build", Name: "build", Admission: &cikit.Admission{Decision: cikit.DecisionAllow, Reason: "push by a maintainer"}},
		&cikit.JobSpec{ID: "deploy-prod", Name: "deploy-prod", Needs: []string{"build"}, When: cikit.WhenManual,
			Gate: &cikit.Gate{Reasons: []string{"fork pull request by a first-time contributor"}, Reviewers: []string{"alice"}, Expires: time.Hour},
			Admission: &cikit.Admission{Decision: cikit.DecisionRequireApproval, Reason: "fork pull request by a first-time contributor",
				CacheScope: "fork/pr-7", TokenPermissions: map[string]string{"contents": "read"}}},
	)
	f.at(0)
	f.queue(run, "build")
	f.start(run, "build")
	f.at(2)
	f.succeed(run, "build")
	return run
}

// TestApproveGatedJobPage: the run page says why the run is held and what
// the policy decided; the gated job's page shows whom it waits for and
// why, with no Start button; Approve, with a comment, sends the session's
// CSRF token and makes it READY, after which the page shows the approval
// and no longer offers to decide. Then a runner starts it.
func TestApproveGatedJobPage(t *testing.T) {
	f := newPlatform(t)
	f.signIn("alice")
	run := gatedRun(f)

	ctx := browse(t)
	p := open(t, ctx, webtest.RunURL(f.url, run))
	if err := p.WaitText("run-held", "deploy-prod waits for approval by alice: fork pull request by a first-time contributor"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("run-policy", "deploy-prod: held: fork pull request by a first-time contributor"); err != nil {
		t.Fatal(err)
	}

	p = open(t, ctx, webtest.JobURL(f.url, run, "deploy-prod"))
	for testid, text := range map[string]string{
		"job-state":        "manual",
		"waiting-for":      "approval by alice: fork pull request by a first-time contributor",
		"approval-waiting": "Waiting for approval by alice: fork pull request by a first-time contributor",
		"admission":        "held: fork pull request by a first-time contributor",
		"job-gate":         "reviewers alice",
	} {
		if err := p.WaitText(testid, text); err != nil {
			t.Fatal(err)
		}
	}
	var shown struct{ Start, SignIn bool }
	if err := p.Eval(`({Start: !document.querySelector('[data-testid="start"]').hidden,
		SignIn: !document.querySelector('[data-testid="sign-in"]').hidden})`, &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Start || shown.SignIn {
		t.Fatalf("a gated job's page shows the Start button (%v) or the sign-in link (%v) to a signed-in reviewer", shown.Start, shown.SignIn)
	}
	if err := chromedp.Do(p.Context(), chromedp.SendKeys(chromedp.CSS(`[data-testid="approval-comment"]`), "checked the diff", chromedp.NodeVisible)); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(`[data-testid="approve"]`); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		if s, err := f.jobState(run, "deploy-prod"); err != nil || s != cikit.JobReady {
			return fmt.Errorf("deploy-prod is %s (%v) in the store, want ready", s, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := f.csrfTokens(); !slices.Equal(got, []string{"csrf-alice"}) {
		t.Errorf("the POSTs carried the CSRF tokens %q, want the session's once", got)
	}
	if err := p.WaitText("approval-record", "approved by alice: checked the diff"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("job-state", "ready"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		var hidden bool
		if err := p.Eval(`document.querySelector('[data-testid="approval"]').hidden`, &hidden); err != nil {
			return err
		}
		if !hidden {
			return fmt.Errorf("the approval box is still shown")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	f.queue(run, "deploy-prod")
	f.start(run, "deploy-prod")
	if err := p.WaitText("job-state", "running"); err != nil {
		t.Fatal(err)
	}
}

// TestApprovalNeedsSignIn: to nobody signed in, a gated job's page offers
// a link to sign in that comes back to it instead of the decisions; on a
// platform without sign-in (no /api/v1/me) it offers the decisions and no
// link, and the API's refusal is shown.
func TestApprovalNeedsSignIn(t *testing.T) {
	ctx := browse(t)

	f := newPlatform(t)
	run := gatedRun(f)
	p := open(t, ctx, webtest.JobURL(f.url, run, "deploy-prod"))
	if err := p.WaitText("sign-in", "Sign in"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error { return shows(p, false, "/auth/login?next=%2Fruns%2Frun-1%2Fjobs%2Fdeploy-prod") }); err != nil {
		t.Fatal(err)
	}

	f = newPlatform(t)
	f.withoutSignIn()
	run = gatedRun(f)
	p = open(t, ctx, webtest.JobURL(f.url, run, "deploy-prod"))
	if err := p.WaitText("approval-waiting", "Waiting for approval by alice"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error { return shows(p, true, "") }); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(`[data-testid="reject"]`); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("approval-error", "Could not reject the job: a rejection says why"); err != nil {
		t.Fatal(err)
	}
	if s, err := f.jobState(run, "deploy-prod"); err != nil || s != cikit.JobManual {
		t.Fatalf("deploy-prod is %s (%v), want still manual", s, err)
	}
}

// shows checks that the approval box of p offers the decisions (or not)
// and a sign-in link to href (none for "").
func shows(p *webtest.Page, decide bool, href string) error {
	var got struct {
		Decide bool
		Href   string
	}
	err := p.Eval(`(() => {
		const a = document.querySelector('[data-testid="sign-in"]');
		return {Decide: !document.querySelector('.approval .decide').hidden, Href: a.hidden ? '' : a.getAttribute('href')};
	})()`, &got)
	if err != nil {
		return err
	}
	if got.Decide != decide || got.Href != href {
		return fmt.Errorf("the decisions are shown: %v, the sign-in link goes to %q; want %v and %q", got.Decide, got.Href, decide, href)
	}
	return nil
}
