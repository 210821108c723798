package web_test

import (
	"fmt"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/reference/web/webtest"
)

// TestManualJobPage: a manual job's page shows it waiting for a person,
// with a Start button that starts it through the API; the run page draws
// it as manual.
func TestManualJobPage(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.gitlab-ci.yml",
		&cikit.JobSpec{ID: "build", Name: "build"},
		&cikit.JobSpec{ID: "deploy-prod", Name: "deploy-prod", Needs: []string{"build"}, When: cikit.WhenManual, AllowFailure: true},
	)
	f.at(0)
	f.queue(run, "build")
	f.start(run, "build")
	f.at(2)
	f.succeed(run, "build")

	ctx := browse(t)
	p := open(t, ctx, webtest.RunURL(f.url, run))
	if _, err := p.WaitRun(webtest.RunPageWant{
		State:        "succeeded",
		Jobs:         map[string]string{"build": "succeeded", "deploy-prod": "manual"},
		Edges:        [][2]string{{"build", "deploy-prod"}},
		CriticalPath: []string{"build"},
	}); err != nil {
		t.Fatal(err)
	}

	p = open(t, ctx, webtest.JobURL(f.url, run, "deploy-prod"))
	if err := p.WaitText("job-state", "manual"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("waiting-for", "a person to start it"); err != nil {
		t.Fatal(err)
	}
	if err := p.Click(`[data-testid="start"]`); err != nil {
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
	if err := p.WaitText("job-state", "ready"); err != nil {
		t.Fatal(err)
	}
	var hidden bool
	if err := p.Eval(`document.querySelector('[data-testid="start"]').hidden`, &hidden); err != nil {
		t.Fatal(err)
	}
	if !hidden {
		t.Error("the Start button is shown for a job that is no longer manual")
	}
}
