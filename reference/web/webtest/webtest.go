// Package webtest drives the web UI (package web) in a headless Chromium,
// for tests: it starts the browser, opens pages and reads what they show
// through the data-testid attributes the UI puts on its elements.
//
// [Browser] starts a Chromium for one test. [CheckRunPage] and
// [CheckLiveLog] are whole checks against a server that serves the UI and
// its API, such as the platform's end-to-end test makes; [Open] and the
// methods of [Page] are their parts, for tests that act on a page while
// it is open.
//
// Every wait lasts until what is awaited shows or the context ends: give
// the context a deadline.
package webtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cikit/cikit/internal/proctest"
	"github.com/cikit/cikit/internal/syncbuf"
	"github.com/cikit/cikit/internal/testenv"
)

// pollInterval is how often a wait reads the page again.
const pollInterval = 50 * time.Millisecond

// FindChromium returns the path of the Chromium on PATH, as chromium or
// chromium-browser.
func FindChromium() (string, error) {
	var errs []error
	for _, name := range []string{"chromium", "chromium-browser"} {
		path, err := exec.LookPath(name)
		if err == nil {
			return path, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// Browser starts a headless Chromium for t and returns a context that
// holds it, for Open and the checks. Without a usable Chromium it ends t
// through testenv.ToolUnavailable (a skip, or in CI a failure). The
// browser runs without its sandbox (which fails as root and in many
// containers), so it must only load pages of the test; it has a fresh
// profile in t.TempDir. When t ends, the browser is closed, and t fails
// if any process of it is left.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		testenv.ToolUnavailable(t, testenv.Chromium, err)
	}
	profile := t.TempDir()
	var output syncbuf.Buffer // the browser's, which its own goroutine writes
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(&output),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	closeBrowser := func() {
		// A graceful close, bounded; then the allocator kills what is left
		// and waits for the process.
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := chromedp.Cancel(cctx)
		ccancel()
		cancel()
		cancelAlloc()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("closing chromium: %v", err)
		}
		if left := proctest.Containing(profile); len(left) > 0 {
			t.Errorf("chromium processes outlived the browser: pids %v", left)
		}
	}
	if err := chromedp.Do(ctx); err != nil {
		closeBrowser()
		testenv.ToolUnavailable(t, testenv.Chromium, fmt.Errorf("starting %s: %w; its output:\n%s", path, err, output.String()))
	}
	t.Cleanup(closeBrowser)
	return ctx
}

// RunURL is the UI's address of a run, below the server at baseURL.
func RunURL(baseURL, runID string) string {
	return strings.TrimSuffix(baseURL, "/") + "/runs/" + url.PathEscape(runID)
}

// JobURL is the UI's address of a job of a run, below the server at
// baseURL.
func JobURL(baseURL, runID, jobID string) string {
	return RunURL(baseURL, runID) + "/jobs/" + url.PathEscape(jobID)
}

// CheckRunPage opens the page of run runID of the UI at baseURL in the
// browser of ctx (see Browser) and waits until it shows want. Its error,
// when ctx ends first, says how the page last differed from want; an
// exception the page threw is an error too.
func CheckRunPage(ctx context.Context, baseURL, runID string, want RunPageWant) error {
	p, err := Open(ctx, RunURL(baseURL, runID))
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.WaitRun(want); err != nil {
		return err
	}
	return p.check()
}

// CheckLiveLog opens the page of job jobID of run runID of the UI at
// baseURL in the browser of ctx (see Browser) and waits until its log
// shows wantText. An exception the page threw is an error too.
func CheckLiveLog(ctx context.Context, baseURL, runID, jobID, wantText string) error {
	p, err := Open(ctx, JobURL(baseURL, runID, jobID))
	if err != nil {
		return err
	}
	defer p.Close()
	if _, err := p.WaitLog(wantText); err != nil {
		return err
	}
	return p.check()
}
