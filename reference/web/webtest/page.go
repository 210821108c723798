package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// Page is a page of the UI open in a tab of the browser.
type Page struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the console is no longer read

	mu         sync.Mutex
	exceptions []string
}

// Open opens url in a new tab of the browser of ctx (see Browser). The
// tab lives as long as ctx, or until Close.
func Open(ctx context.Context, url string) (*Page, error) {
	tctx, cancel := chromedp.NewContext(ctx)
	p := &Page{ctx: tctx, cancel: cancel, done: make(chan struct{})}
	// Subscribe before the page loads, so no exception of it is missed.
	console := chromedp.Console(tctx)
	go p.watch(console)
	if err := chromedp.Do(tctx, chromedp.Navigate(url)); err != nil {
		p.Close()
		return nil, fmt.Errorf("webtest: opening %s: %w", url, err)
	}
	return p, nil
}

// watch records the exceptions the page throws and does not catch, until
// the tab closes.
func (p *Page) watch(console iter.Seq2[chromedp.ConsoleMessage, error]) {
	defer close(p.done)
	for m, err := range console {
		if err != nil {
			return
		}
		if m.IsException() {
			p.mu.Lock()
			p.exceptions = append(p.exceptions, m.String())
			p.mu.Unlock()
		}
	}
}

// Exceptions returns the exceptions the page threw and did not catch
// (unhandled promise rejections included), as the console shows them.
func (p *Page) Exceptions() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exceptions)
}

// Context is the tab's context, for chromedp actions of the caller's own.
func (p *Page) Context() context.Context { return p.ctx }

// Close closes the tab.
func (p *Page) Close() {
	p.cancel()
	<-p.done
}

// check returns an error naming the page's exceptions, if it threw any.
func (p *Page) check() error {
	if ex := p.Exceptions(); len(ex) > 0 {
		return fmt.Errorf("webtest: the page threw %d exceptions: %s", len(ex), strings.Join(ex, "; "))
	}
	return nil
}

// Eval evaluates the JavaScript expression js in the page and decodes
// its value, as JSON, into res.
func (p *Page) Eval(js string, res any) error {
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]byte](js))
	if err != nil {
		return fmt.Errorf("webtest: evaluating in the page: %w", err)
	}
	if err := json.Unmarshal(raw, res); err != nil {
		return fmt.Errorf("webtest: decoding what the page said: %w", err)
	}
	return nil
}

// wait calls check until it returns nil, and returns that, or the last
// error once the tab's context ends.
func (p *Page) wait(what string, check func() error) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-p.ctx.Done():
			return fmt.Errorf("webtest: waiting for %s: %w; last: %v", what, context.Cause(p.ctx), err)
		case <-t.C:
		}
	}
}

// RunPage is what a run page shows.
type RunPage struct {
	// State is the run's state.
	State string `json:"state"`
	// Nodes are the jobs of the graph, and Edges its needs, in page order.
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
	// Error is the message of a failed cancel or retry; empty when none
	// is shown.
	Error string `json:"error"`
}

// Node is a job in a run page's graph.
type Node struct {
	Job      string `json:"job"`
	State    string `json:"state"`
	Critical bool   `json:"critical"`
	// Class is its CSS class, which says how it looks.
	Class string `json:"class"`
	// X and Y are its position in the drawing.
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Edge is a need in a run page's graph: job To needs job From.
type Edge struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Critical bool   `json:"critical"`
}

const runPageJS = `(() => {
  const all = (sel) => [...document.querySelectorAll(sel)];
  const state = document.querySelector('[data-testid="run-state"]');
  const err = document.querySelector('[data-testid="error"]');
  return {
    state: state ? state.dataset.state : '',
    nodes: all('[data-testid="dag-node"]').map((n) => {
      const r = n.querySelector('rect');
      return {
        job: n.dataset.job, state: n.dataset.state, critical: n.dataset.critical === 'true',
        class: n.getAttribute('class') || '',
        x: r ? Number(r.getAttribute('x')) : 0, y: r ? Number(r.getAttribute('y')) : 0,
      };
    }),
    edges: all('[data-testid="dag-edge"]').map((e) => ({ from: e.dataset.from, to: e.dataset.to, critical: e.dataset.critical === 'true' })),
    error: err && !err.hidden ? err.textContent : '',
  };
})()`

// Run reads the run page as it is now.
func (p *Page) Run() (*RunPage, error) {
	var r RunPage
	if err := p.Eval(runPageJS, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RunPageWant is what a run page should show.
type RunPageWant struct {
	// State is the run's state; empty accepts any.
	State string
	// Jobs maps the ID of every job the graph must show, and no other, to
	// its state; an empty state accepts any.
	Jobs map[string]string
	// Edges lists every need the graph must show, and no other, as
	// {need, job}; nil does not check them.
	Edges [][2]string
	// CriticalPath lists the jobs of the critical path, first first: the
	// graph must highlight exactly these nodes and the edges between
	// consecutive ones. Nil does not check it; empty wants no highlight.
	CriticalPath []string
}

// Diff describes how page differs from w, or returns "" if it does not.
func (w RunPageWant) Diff(page *RunPage) string {
	var d []string
	if w.State != "" && page.State != w.State {
		d = append(d, fmt.Sprintf("run state %q, want %q", page.State, w.State))
	}
	seen := make(map[string]bool)
	onPath := make(map[string]bool)
	for _, id := range w.CriticalPath {
		onPath[id] = true
	}
	for _, n := range page.Nodes {
		seen[n.Job] = true
		want, ok := w.Jobs[n.Job]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("unexpected node %q", n.Job))
		case want != "" && n.State != want:
			d = append(d, fmt.Sprintf("node %q is %s, want %s", n.Job, n.State, want))
		}
		if w.CriticalPath != nil && n.Critical != onPath[n.Job] {
			d = append(d, fmt.Sprintf("node %q critical=%t, want %t", n.Job, n.Critical, onPath[n.Job]))
		}
	}
	for id := range w.Jobs {
		if !seen[id] {
			d = append(d, fmt.Sprintf("no node %q", id))
		}
	}
	pathEdges := make(map[[2]string]bool)
	for i := 1; i < len(w.CriticalPath); i++ {
		pathEdges[[2]string{w.CriticalPath[i-1], w.CriticalPath[i]}] = true
	}
	got := make(map[[2]string]bool)
	for _, e := range page.Edges {
		k := [2]string{e.From, e.To}
		got[k] = true
		if w.Edges != nil && !slices.Contains(w.Edges, k) {
			d = append(d, fmt.Sprintf("unexpected edge %s → %s", e.From, e.To))
		}
		if w.CriticalPath != nil && e.Critical != pathEdges[k] {
			d = append(d, fmt.Sprintf("edge %s → %s critical=%t, want %t", e.From, e.To, e.Critical, pathEdges[k]))
		}
	}
	for _, k := range w.Edges {
		if !got[k] {
			d = append(d, fmt.Sprintf("no edge %s → %s", k[0], k[1]))
		}
	}
	for k := range pathEdges {
		if !got[k] {
			d = append(d, fmt.Sprintf("critical path %s → %s has no edge", k[0], k[1]))
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}

// WaitRun waits until the run page shows want, and returns it as shown.
func (p *Page) WaitRun(want RunPageWant) (*RunPage, error) {
	var page *RunPage
	err := p.wait("the run page", func() error {
		var err error
		if page, err = p.Run(); err != nil {
			return err
		}
		if diff := want.Diff(page); diff != "" {
			return fmt.Errorf("%s", diff)
		}
		return nil
	})
	return page, err
}

// Log is what a job page's log shows.
type Log struct {
	// State is "waiting" (the log has not begun, or the stream is being
	// resumed), "following", "ended", or "missing" (there is no log).
	State string `json:"state"`
	// Follow says the view scrolls along with new lines; AtBottom, that
	// it is scrolled to the end.
	Follow   bool      `json:"follow"`
	AtBottom bool      `json:"atBottom"`
	Lines    []LogLine `json:"lines"`
}

// LogLine is a line of a log.
type LogLine struct {
	// ID is the line's element ID, "L<n>"; Anchor the link to it, "#L<n>".
	ID     string `json:"id"`
	Anchor string `json:"anchor"`
	// Text is the line as the reader sees it, without its number.
	Text string `json:"text"`
	// Spans are its styled parts.
	Spans []Span `json:"spans"`
	// Highlighted says the line is the one the URL's fragment names.
	Highlighted bool `json:"highlighted"`
	// Marker is the workflow command's marker the line began with, shown
	// without it: "group" (the line is a group's title), "endgroup",
	// "error", "warning", "notice" or "debug"; empty for other lines.
	Marker string `json:"marker"`
	// Group is the ID of the title line of the group the line is folded
	// in; empty outside groups (and for a title itself).
	Group string `json:"group"`
	// Shown says the line is displayed: not folded in a collapsed group,
	// not a group's hidden end.
	Shown bool `json:"shown"`
}

// Span is a styled part of a log line.
type Span struct {
	Class string `json:"class"`
	Text  string `json:"text"`
}

// Text is the log's text: its lines, each ended by "\n".
func (l *Log) Text() string {
	var b strings.Builder
	for _, line := range l.Lines {
		b.WriteString(line.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

const logJS = `(() => {
  const log = document.querySelector('[data-testid="log"]');
  if (!log) return null;
  return {
    state: log.dataset.state || '',
    follow: log.dataset.follow === 'true',
    atBottom: log.scrollTop + log.clientHeight >= log.scrollHeight - 8,
    lines: [...log.querySelectorAll('[data-testid="log-line"]')].map((l) => {
      const a = l.querySelector('a[href^="#L"]');
      const content = l.querySelector('.content');
      return {
        id: l.id, anchor: a ? a.getAttribute('href') : '',
        text: content ? content.textContent : l.textContent,
        spans: [...l.querySelectorAll('.content span')].map((s) => ({ class: s.className, text: s.textContent })),
        highlighted: l.classList.contains('highlight'),
        marker: l.dataset.marker || '',
        group: (() => { const b = l.closest('.group-body'); const head = b && b.parentElement.querySelector('.group-head'); return head ? head.id : ''; })(),
        shown: l.getClientRects().length > 0,
      };
    }),
  };
})()`

// Log reads the job page's log as it is now; nil if the page has none.
func (p *Page) Log() (*Log, error) {
	var l *Log
	if err := p.Eval(logJS, &l); err != nil {
		return nil, err
	}
	return l, nil
}

// Annotation is an annotation a run page lists.
type Annotation struct {
	// Level is "error", "warning" or "notice"; Job the ID of the job whose
	// step attached it; File and Line where in the repository (empty and
	// 0 when it did not say).
	Level string `json:"level"`
	Job   string `json:"job"`
	File  string `json:"file"`
	Line  int    `json:"line"`
	// Text is the item as the reader sees it; Link the page it links to.
	Text string `json:"text"`
	Link string `json:"link"`
}

const runAnnotationsJS = `(() => {
  const box = document.querySelector('[data-testid="run-annotations"]');
  if (!box || !box.getClientRects().length) return [];
  return [...box.querySelectorAll('[data-testid="run-annotation"]')].map((a) => {
    const link = a.querySelector('a');
    return { level: a.dataset.level, job: a.dataset.job, file: a.dataset.file, line: Number(a.dataset.line) || 0,
      text: a.textContent, link: link ? link.getAttribute('href') : '' };
  });
})()`

// RunAnnotations reads the annotations the run page shows now, in page
// order; none when it shows none.
func (p *Page) RunAnnotations() ([]Annotation, error) {
	var as []Annotation
	if err := p.Eval(runAnnotationsJS, &as); err != nil {
		return nil, err
	}
	return as, nil
}

// WaitLog waits until the job page's log shows text, and returns it.
func (p *Page) WaitLog(text string) (*Log, error) {
	var l *Log
	err := p.wait(fmt.Sprintf("the log to show %q", text), func() error {
		var err error
		if l, err = p.Log(); err != nil {
			return err
		}
		if l == nil {
			return fmt.Errorf("the page has no log")
		}
		if !strings.Contains(l.Text(), text) {
			return fmt.Errorf("the log (%s, %d lines) does not show it yet", l.State, len(l.Lines))
		}
		return nil
	})
	return l, err
}

// WaitLogState waits until the job page's log is in state (see Log), and
// returns it.
func (p *Page) WaitLogState(state string) (*Log, error) {
	var l *Log
	err := p.wait("the log to be "+state, func() error {
		var err error
		if l, err = p.Log(); err != nil {
			return err
		}
		if l == nil {
			return fmt.Errorf("the page has no log")
		}
		if l.State != state {
			return fmt.Errorf("the log is %s", l.State)
		}
		return nil
	})
	return l, err
}

// WaitText waits until the element with data-testid testid shows text.
func (p *Page) WaitText(testid, text string) error {
	js := fmt.Sprintf(`(() => { const e = document.querySelector('[data-testid=%q]'); return e && !e.hidden ? e.textContent : null; })()`, testid)
	return p.wait(fmt.Sprintf("%s to show %q", testid, text), func() error {
		var got *string
		if err := p.Eval(js, &got); err != nil {
			return err
		}
		if got == nil {
			return fmt.Errorf("no visible %s", testid)
		}
		if !strings.Contains(*got, text) {
			return fmt.Errorf("%s shows %q", testid, *got)
		}
		return nil
	})
}

// Click clicks the element that matches the CSS selector sel, once it is
// visible.
func (p *Page) Click(sel string) error {
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		return fmt.Errorf("webtest: clicking %s: %w", sel, err)
	}
	return nil
}

// WaitPath waits until the page's location path is path, and returns
// the whole location.
func (p *Page) WaitPath(path string) (string, error) {
	var loc string
	err := p.wait("the location "+path, func() error {
		var got struct{ Path, Href string }
		if err := p.Eval(`({Path: location.pathname, Href: location.href})`, &got); err != nil {
			return err
		}
		loc = got.Href
		if got.Path != path {
			return fmt.Errorf("at %s", got.Path)
		}
		return nil
	})
	return loc, err
}
