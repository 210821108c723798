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
