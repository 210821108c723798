package web_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cikit/cikit"
	"github.com/cikit/cikit/reference/web/webtest"
)

func TestJobPageFollowsLog(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.cikit.yml", &cikit.JobSpec{ID: "build", Name: "build", RunsOn: []string{"linux"}})
	f.queue(run, "build")
	f.dropFirstStream()

	ctx := browse(t)
	p := open(t, ctx, webtest.JobURL(f.url, run, "build"))
	// Queued: the page says why it waits; the log has not begun.
	if err := p.WaitText("why", "no idle runner has the labels linux · pool linux · expected in about"); err != nil {
		t.Fatal(err)
	}
	if l, err := p.WaitLogState("waiting"); err != nil || len(l.Lines) != 0 {
		t.Fatalf("before the log begins: %+v, %v", l, err)
	}

	f.start(run, "build")
	// Pieces as a runner sends them: escapes split between them, a
	// colour, bold and a bright colour, a reset, an erase-line and a
	// window title (both dropped), a progress line redrawn with \r.
	pieces := []string{
		"first line\n\x1b[31mred\x1b[0m plain \x1b[1;92mbold bright green\x1b[0m\n\x1b[",
		"34mblue\x1b[39m after\x1b[K\n\x1b]0;title\x07no title\n",
		"progress 10%\rprogress 100%\r\npartial ",
		"line end\n",
	}
	wantLines := []string{"first line", "red plain bold bright green", "blue after", "no title", "progress 100%", "partial line end"}
	// Each piece shows while the page is open, in order.
	shown := []string{"first line", "blue after", "progress 100%", "partial line end"}
	for i, piece := range pieces {
		f.appendLog(run, "build", piece)
		if _, err := p.WaitLog(shown[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitFor(ctx, func() error {
		var hidden bool
		if err := p.Eval(`document.querySelector('[data-testid="why"]').hidden`, &hidden); err != nil {
			return err
		}
		if !hidden {
			return fmt.Errorf("the page still says why the job waits after it started")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	l, err := p.Log()
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, line := range l.Lines {
		texts = append(texts, line.Text)
		if id := fmt.Sprintf("L%d", i+1); line.ID != id || line.Anchor != "#"+id {
			t.Errorf("line %d: id %q, anchor %q", i+1, line.ID, line.Anchor)
		}
		if strings.ContainsAny(line.Text, "\x1b\r\x07") || strings.Contains(line.Text, "[3") {
			t.Errorf("line %d shows raw escapes: %q", i+1, line.Text)
		}
	}
	if !slices.Equal(texts, wantLines) {
		t.Fatalf("lines %q, want %q", texts, wantLines)
	}
	wantSpans := map[int][]webtest.Span{
		1: {{Class: "ansi-fg-1", Text: "red"}, {Class: "ansi-fg-10 ansi-bold", Text: "bold bright green"}},
		2: {{Class: "ansi-fg-4", Text: "blue"}},
	}
	for i, want := range wantSpans {
		if got := l.Lines[i].Spans; !slices.Equal(got, want) {
			t.Errorf("line %d: spans %+v, want %+v", i+1, got, want)
		}
	}
	for _, i := range []int{0, 3, 4, 5} {
		if len(l.Lines[i].Spans) != 0 {
			t.Errorf("line %d: spans %+v, want none", i+1, l.Lines[i].Spans)
		}
	}

	// The first stream was dropped after one event: the browser resumed
	// it from that event's id, and nothing showed twice.
	lastIDs := f.followIDs()
	first := fmt.Sprint(len(pieces[0]))
	if !slices.Contains(lastIDs, first) {
		t.Errorf("the follow requests' Last-Event-IDs are %q; none resumes from %s", lastIDs, first)
	}

	// Many lines: the view follows them to the bottom.
	var many strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&many, "line %03d\n", i)
	}
	f.appendLog(run, "build", many.String())
	if l, err = p.WaitLog("line 300"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		if l, err = p.Log(); err != nil {
			return err
		}
		if !l.Follow || !l.AtBottom {
			return fmt.Errorf("follow %t, at the bottom %t", l.Follow, l.AtBottom)
		}
		return nil
	}); err != nil {
		t.Fatalf("after 300 more lines: %v", err)
	}
	if n := len(l.Lines); n != len(wantLines)+300 {
		t.Errorf("%d lines, want %d", n, len(wantLines)+300)
	}

	f.succeed(run, "build")
	f.endLog(run, "build")
	if _, err := p.WaitLogState("ended"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitText("log-status", "End of the log"); err != nil {
		t.Fatal(err)
	}

	// The exported check finds the text on a page of its own.
	if err := webtest.CheckLiveLog(ctx, f.url, run, "build", "line 300"); err != nil {
		t.Fatal(err)
	}
}

// A URL naming a line opens the page there; a line number links to it.
func TestLogLineAnchors(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.cikit.yml", &cikit.JobSpec{ID: "build"})
	f.queue(run, "build")
	f.start(run, "build")
	var b strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	f.appendLog(run, "build", b.String())
	f.succeed(run, "build")
	f.endLog(run, "build")

	ctx := browse(t)
	p := open(t, ctx, webtest.JobURL(f.url, run, "build")+"#L12")
	l, err := p.WaitLogState("ended")
	if err != nil {
		t.Fatal(err)
	}
	highlighted := func(l *webtest.Log) []string {
		var ids []string
		for _, line := range l.Lines {
			if line.Highlighted {
				ids = append(ids, line.ID)
			}
		}
		return ids
	}
	if got := highlighted(l); !slices.Equal(got, []string{"L12"}) || l.Follow || l.AtBottom {
		t.Errorf("opened at #L12: highlighted %v, follow %t, at the bottom %t; want L12 only, scrolled to it", got, l.Follow, l.AtBottom)
	}
	var visible bool
	if err := p.Eval(`(() => { const log = document.querySelector('[data-testid="log"]').getBoundingClientRect();
		const r = document.getElementById('L12').getBoundingClientRect();
		return r.top >= log.top && r.bottom <= log.bottom; })()`, &visible); err != nil || !visible {
		t.Errorf("line 12 is not scrolled into view (%v)", err)
	}

	if err := p.Click(`#L150 a[href="#L150"]`); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		if l, err = p.Log(); err != nil {
			return err
		}
		if got := highlighted(l); !slices.Equal(got, []string{"L150"}) {
			return fmt.Errorf("highlighted %v", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("after a click on line 150's number: %v", err)
	}
	var hash string
	if err := p.Eval(`location.hash`, &hash); err != nil || hash != "#L150" {
		t.Errorf("location.hash %q (%v), want #L150", hash, err)
	}
}

// The markers GitHub's workflow commands leave in the log: a group folds
// its lines under its title, collapsed until clicked; error, warning and
// notice lines are marked by level; the markers themselves are not shown.
func TestLogFoldsGroupsAndMarksLevels(t *testing.T) {
	f := newPlatform(t)
	run := f.create("acme/api:.github/workflows/ci.yml", &cikit.JobSpec{ID: "build"})
	f.queue(run, "build")
	f.start(run, "build")
	// A marker split between two pieces still counts; one in the middle
	// of a line does not; a group ends at ##[endgroup] or at the next
	// group.
	f.appendLog(run, "build", "before\n##[gr")
	f.appendLog(run, "build", "oup]Compile\ngo build ./...\n\x1b[32mok\x1b[0m\n##[endgroup]\n"+
		"##[error]src/app.go:12: undefined: x\n##[warning]slow test\n##[notice]cache hit\n##[debug]env read\n"+
		"echo ##[error]not a marker\n##[group]Test\ngo test\n##[group]Vet\ngo vet\n##[endgroup]\nafter\n")
	f.succeed(run, "build")
	f.endLog(run, "build")

	ctx := browse(t)
	p := open(t, ctx, webtest.JobURL(f.url, run, "build"))
	l, err := p.WaitLogState("ended")
	if err != nil {
		t.Fatal(err)
	}
	type line struct {
		text, marker, group string
		shown               bool
	}
	lines := func(l *webtest.Log) []line {
		var got []line
		for _, x := range l.Lines {
			got = append(got, line{x.Text, x.Marker, x.Group, x.Shown})
		}
		return got
	}
	collapsed := []line{
		{"before", "", "", true},
		{"Compile", "group", "", true},
		{"go build ./...", "", "L2", false},
		{"ok", "", "L2", false},
		{"", "endgroup", "L2", false},
		{"src/app.go:12: undefined: x", "error", "", true},
		{"slow test", "warning", "", true},
		{"cache hit", "notice", "", true},
		{"env read", "debug", "", true},
		{"echo ##[error]not a marker", "", "", true},
		{"Test", "group", "", true},
		{"go test", "", "L11", false},
		{"Vet", "group", "", true},
		{"go vet", "", "L13", false},
		{"", "endgroup", "L13", false},
		{"after", "", "", true},
	}
	if got := lines(l); !slices.Equal(got, collapsed) {
		t.Fatalf("lines\n%+v\nwant\n%+v", got, collapsed)
	}
	// The colour of a folded line stays.
	if got := l.Lines[3].Spans; !slices.Equal(got, []webtest.Span{{Class: "ansi-fg-2", Text: "ok"}}) {
		t.Errorf("line 4's spans %+v", got)
	}
	var levels []string
	if err := p.Eval(`[...document.querySelectorAll('[data-testid="log-line"][class*="level-"]')].map((l) => l.id + ' ' + l.className + ' ' + getComputedStyle(l.querySelector('.content'), '::before').content)`, &levels); err != nil {
		t.Fatal(err)
	}
	wantLevels := []string{`L6 line level-error "Error: "`, `L7 line level-warning "Warning: "`, `L8 line level-notice "Notice: "`, `L9 line level-debug "Debug: "`}
	if !slices.Equal(levels, wantLevels) {
		t.Errorf("marked lines %q, want %q", levels, wantLevels)
	}

	// A click on a group's title unfolds it; another folds it again.
	shown := func(want map[string]bool) error {
		return waitFor(ctx, func() error {
			l, err := p.Log()
			if err != nil {
				return err
			}
			for _, x := range l.Lines {
				if w, ok := want[x.ID]; ok && x.Shown != w {
					return fmt.Errorf("line %s (%q) shown %t, want %t", x.ID, x.Text, x.Shown, w)
				}
			}
			return nil
		})
	}
	if err := p.Click(`#L2 [data-testid="log-fold"]`); err != nil {
		t.Fatal(err)
	}
	if err := shown(map[string]bool{"L3": true, "L4": true, "L5": false, "L12": false}); err != nil {
		t.Fatal(err)
	}
	var expanded string
	if err := p.Eval(`document.querySelector('#L2 [data-testid="log-fold"]').getAttribute('aria-expanded')`, &expanded); err != nil || expanded != "true" {
		t.Errorf("the unfolded group's button says aria-expanded=%q (%v)", expanded, err)
	}
	if err := p.Click(`#L2 .content`); err != nil {
		t.Fatal(err)
	}
	if err := shown(map[string]bool{"L3": false, "L4": false}); err != nil {
		t.Fatal(err)
	}

	// A link to a folded line unfolds its group.
	p2 := open(t, ctx, webtest.JobURL(f.url, run, "build")+"#L14")
	if _, err := p2.WaitLogState("ended"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, func() error {
		l, err := p2.Log()
		if err != nil {
			return err
		}
		if x := l.Lines[13]; !x.Shown || !x.Highlighted {
			return fmt.Errorf("line 14 shown %t, highlighted %t", x.Shown, x.Highlighted)
		}
		if l.Lines[11].Shown {
			return fmt.Errorf("line 12, of another group, is shown")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
