package platform_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit"

	"github.com/cikit/cikit/reference/web/webtest"
	"github.com/cikit/cikit/vcs/github/githubtest"
	"github.com/cikit/cikit/vcs/status"
)

// TestBrowserRunPage: in headless Chromium, the platform's run page draws
// the DAG of a running pipeline with its jobs' states, and the job page
// shows the live log of the job while it runs.
func TestBrowserRunPage(t *testing.T) {
	w := newWorld(t, map[string]string{".cikit.yml": `jobs:
  setup:
    steps:
      - echo ready
  watch:
    needs: [setup]
    steps:
      - printf 'watching \033[1;32mlive\033[0m\n'
      - sleep 60
  after:
    needs: [watch]
    steps:
      - echo done
`})
	ctx := webtest.Browser(t)
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-browser", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	var runID string
	waitFor(t, 30*time.Second, "watch to run", func() bool {
		st, ok := w.statuses(t)[status.JobContext(".cikit.yml", "watch")]
		if ok && strings.HasPrefix(st.Description, "running") {
			runID = runIDOf(t, st)
			return true
		}
		return false
	})

	// The checks wait for what they look for; a page that never shows it
	// fails them at the deadline.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, webtest.CheckRunPage(ctx, adminProxy(t, base), runID, webtest.RunPageWant{
		State: "running",
		Jobs:  map[string]string{"setup": "succeeded", "watch": "running", "after": "pending"},
		Edges: [][2]string{{"setup", "watch"}, {"watch", "after"}},
	}))
	require.NoError(t, webtest.CheckLiveLog(ctx, adminProxy(t, base), runID, "watch", "watching live"))

	// The log was live: the job is still running.
	var job struct {
		State string `json:"state"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+runID+"/jobs/watch", &job))
	require.Equal(t, "running", job.State)
}

// annotatedWorkflow writes a folded group, an error annotation naming a
// file and line, and a warning, through GitHub's workflow commands.
const annotatedWorkflow = `on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - name: compile
        run: |
          echo "::group::Compile the module"
          echo "compiling pkg/app"
          echo "::endgroup::"
          echo "::error file=pkg/app/app.go,line=12,title=Build::undefined: x"
          echo "::warning::slow test"
          echo "finished"
`

// TestBrowserFoldsGroupsAndShowsAnnotations: in headless Chromium, a
// GitHub job's ::group:: is folded in its log, its ::error and ::warning
// lines are marked, and the run page lists the ::error's annotation with
// its file and line, as the job API has it.
func TestBrowserFoldsGroupsAndShowsAnnotations(t *testing.T) {
	const file = ".github/workflows/ci.yml"
	w := newWorld(t, map[string]string{file: annotatedWorkflow})
	ctx := webtest.Browser(t)
	s := serve(t, w.cfg)
	base := s.p.URL()
	code, body := deliver(t, base, "delivery-annotated", pushBody(w.sha))
	require.Equal(t, 202, code, body)
	var st githubtest.Status
	waitFor(t, 60*time.Second, "job build's status to leave pending", func() bool {
		var ok bool
		st, ok = w.statuses(t)[status.JobContext(file, "build")]
		return ok && st.State != "pending"
	})
	require.Equal(t, "success", st.State, st.Description)
	runID := runIDOf(t, st)

	var job struct {
		Annotations []cikit.Annotation `json:"annotations"`
	}
	require.Equal(t, 200, getJSON(t, base+"/api/v1/runs/"+runID+"/jobs/build", &job))
	require.Equal(t, []cikit.Annotation{
		{Level: "error", Title: "Build", Message: "undefined: x", File: "pkg/app/app.go", Line: 12, Step: "compile"},
		{Level: "warning", Message: "slow test", Step: "compile"},
	}, job.Annotations)

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	browse := adminProxy(t, base)
	p, err := webtest.Open(ctx, webtest.JobURL(browse, runID, "build"))
	require.NoError(t, err)
	defer p.Close()
	l, err := p.WaitLogState("ended")
	require.NoError(t, err)
	byText := make(map[string]webtest.LogLine)
	for _, line := range l.Lines {
		byText[line.Text] = line
	}
	head := byText["Compile the module"]
	require.Equal(t, "group", head.Marker, "%+v", l.Lines)
	require.True(t, head.Shown)
	inside := byText["compiling pkg/app"]
	require.Equal(t, head.ID, inside.Group, "%+v", l.Lines)
	require.False(t, inside.Shown, "a line of a collapsed group is shown")
	require.Equal(t, "error", byText["undefined: x"].Marker, "%+v", l.Lines)
	require.Equal(t, "warning", byText["slow test"].Marker, "%+v", l.Lines)
	require.True(t, byText["finished"].Shown)
	require.NoError(t, p.Click(`#`+head.ID+` [data-testid="log-fold"]`))
	waitFor(t, 10*time.Second, "the group to unfold", func() bool {
		l, err := p.Log()
		require.NoError(t, err)
		for _, line := range l.Lines {
			if line.ID == inside.ID {
				return line.Shown
			}
		}
		return false
	})

	r, err := webtest.Open(ctx, webtest.RunURL(browse, runID))
	require.NoError(t, err)
	defer r.Close()
	waitFor(t, 10*time.Second, "the run page's annotations", func() bool {
		as, err := r.RunAnnotations()
		require.NoError(t, err)
		return len(as) == 2 && as[0].Level == "error" && as[0].File == "pkg/app/app.go" && as[0].Line == 12 &&
			strings.Contains(as[0].Text, "pkg/app/app.go:12 Build — undefined: x") && as[1].Level == "warning"
	})
	require.Empty(t, p.Exceptions())
	require.Empty(t, r.Exceptions())
}
