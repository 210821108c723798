// LogView follows a job's log live: an EventSource on the API's follow
// route (which resumes by itself after a dropped connection, from the
// Last-Event-ID), a row per line with its number as an anchor, ANSI
// colours as styled spans. It scrolls along while the reader is at the
// bottom and stops at the log's end.
//
// Lines that begin with one of the markers the runner leaves for GitHub's
// workflow commands are shown without it: "##[group]Title" starts a
// folded group, collapsed, its title shown and a click away from its
// lines; "##[endgroup]" ends it (and is not shown), as does the next
// group (groups do not nest, as on GitHub); "##[error]", "##[warning]",
// "##[notice]" and "##[debug]" lines are highlighted by level.

import * as api from './api.js';
import { AnsiParser, NEWLINE, RETURN } from './ansi.js';
import { h } from './util.js';

// How close to the bottom (px) still counts as at the bottom.
const SLACK = 8;

// A line's marker: what a workflow command left at its start.
const MARKER = /^##\[(group|endgroup|error|warning|notice|debug)\]/;

// stripPrefix removes the first n characters of the text of el's
// children (text nodes and styled spans).
function stripPrefix(el, n) {
  for (const node of [...el.childNodes]) {
    if (n <= 0) return;
    const len = node.textContent.length;
    if (len <= n) {
      node.remove();
    } else {
      node.textContent = node.textContent.slice(n);
    }
    n -= len;
  }
}

// setOpen expands (or collapses) a group of the log.
function setOpen(group, open) {
  group.dataset.open = String(open);
  group.querySelector('.group-body').hidden = !open;
  const fold = group.querySelector('.fold');
  fold.setAttribute('aria-expanded', String(open));
  fold.setAttribute('aria-label', open ? 'collapse the group' : 'expand the group');
}

function decodeBase64(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

export class LogView {
  /**
   * LogView shows the log of attempt of job jobID of run runID.
   * shouldRetry says whether a log that cannot be followed (not begun, or
   * the connection refused) is worth asking for again in a second.
   */
  constructor(runID, jobID, attempt, shouldRetry) {
    this.path = `${api.jobPath(runID, jobID)}/log`;
    this.attempt = attempt;
    this.shouldRetry = shouldRetry;
    this.received = 0;
    this.decoder = new TextDecoder('utf-8');
    this.parser = new AnsiParser();
    this.lines = 0;
    this.row = null;
    this.container = null; // where new lines go: the log, or a group's body
    this.follow = true;
    this.wanted = false;
    this.marked = null;
    this.es = null;
    this.timer = null;
    this.closed = false;

    this.status = h('span', { class: 'log-status', 'data-testid': 'log-status' });
    this.lines_ = h('div', { class: 'log', 'data-testid': 'log', 'data-state': 'waiting', 'data-follow': 'true', tabindex: 0 });
    this.container = this.lines_;
    const raw = h('a', { href: api.url(`${this.path}?attempt=${attempt}`), target: '_blank', rel: 'noopener' }, 'raw');
    this.el = h('section', { class: 'log-box' }, h('div', { class: 'log-bar' }, this.status, raw), this.lines_);
    this.lines_.addEventListener('scroll', () => this.setFollow(this.atBottom()));
    this.onHash = () => this.highlight();
    window.addEventListener('hashchange', this.onHash);
    this.setState('waiting', 'Waiting for the log…');
    this.highlight();
    this.connect();
  }

  atBottom() {
    const el = this.lines_;
    return el.scrollTop + el.clientHeight >= el.scrollHeight - SLACK;
  }

  setFollow(on) {
    this.follow = on;
    this.lines_.dataset.follow = String(on);
  }

  setState(state, message) {
    this.lines_.dataset.state = state;
    this.status.textContent = message;
  }

  connect() {
    this.timer = null;
    const q = new URLSearchParams({ attempt: this.attempt });
    if (this.received > 0) q.set('offset', this.received);
    const es = new EventSource(api.url(`${this.path}/follow?${q}`));
    this.es = es;
    es.addEventListener('open', () => this.setState('following', 'Following the log live'));
    es.addEventListener('log', (ev) => this.onLog(JSON.parse(ev.data)));
    es.addEventListener('end', (ev) => this.onEnd(JSON.parse(ev.data)));
    es.addEventListener('error', () => {
      // While CONNECTING the browser resumes by itself; CLOSED means the
      // answer was not a stream (the log has not begun: 404).
      if (es.readyState !== EventSource.CLOSED || this.closed || this.es !== es) return;
      this.es = null;
      if (this.shouldRetry()) {
        if (this.lines_.dataset.state !== 'waiting') this.setState('waiting', 'Reconnecting…');
        this.timer = setTimeout(() => this.connect(), 1000);
      } else {
        this.setState('missing', 'This job has no log.');
      }
    });
  }

  onLog(chunk) {
    let bytes = decodeBase64(chunk.data);
    const start = chunk.offset;
    const end = start + bytes.length;
    if (end <= this.received) return; // already shown
    if (start < this.received) bytes = bytes.subarray(this.received - start);
    this.received = end;
    this.render(this.parser.feed(this.decoder.decode(bytes, { stream: true })));
  }

  onEnd(info) {
    this.render(this.parser.feed(this.decoder.decode()));
    this.parser.end();
    if (this.row) this.endRow(); // a last line without its newline
    this.stop();
    const size = typeof info.bytes === 'number' ? ` (${info.bytes} bytes)` : '';
    this.setState('ended', info.complete === false ? `The log ended incomplete${size}.` : `End of the log${size}.`);
  }

  render(tokens) {
    if (tokens.length === 0) return;
    for (const t of tokens) {
      if (t === NEWLINE) {
        if (!this.row) this.newRow();
        this.endRow();
      } else if (t === RETURN) {
        if (this.row) this.row.replaceChildren();
      } else {
        if (!this.row) this.newRow();
        this.row.append(t.classes ? h('span', { class: t.classes }, t.text) : document.createTextNode(t.text));
      }
    }
    if (this.wanted) this.highlight();
    if (this.follow) this.lines_.scrollTop = this.lines_.scrollHeight;
  }

  newRow() {
    const n = ++this.lines;
    const content = h('span', { class: 'content' });
    this.container.append(h('div', { class: 'line', 'data-testid': 'log-line', id: `L${n}` },
      h('a', { class: 'ln', href: `#L${n}`, 'data-n': n, 'aria-label': `line ${n}` }), content));
    this.row = content;
  }

  // endRow ends the current line: a line with a marker loses it and
  // becomes a group's title, a group's end or a highlighted line.
  endRow() {
    const content = this.row;
    this.row = null;
    const m = MARKER.exec(content.textContent);
    if (!m) return;
    const line = content.parentElement;
    stripPrefix(content, m[0].length);
    line.dataset.marker = m[1];
    switch (m[1]) {
      case 'group':
        this.openGroup(line);
        break;
      case 'endgroup':
        line.hidden = true;
        this.container = this.lines_;
        break;
      default:
        line.classList.add(`level-${m[1]}`);
    }
  }

  // openGroup makes line the title of a new group, collapsed, that the
  // next lines go into; it ends the group before.
  openGroup(line) {
    this.container = this.lines_;
    const fold = h('button', { type: 'button', class: 'fold', 'data-testid': 'log-fold' });
    const body = h('div', { class: 'group-body' });
    const group = h('div', { class: 'log-group', 'data-testid': 'log-group' });
    line.classList.add('group-head');
    // The line is the log's last, at its end or at the end of the group
    // before: the new group follows both.
    this.lines_.append(group);
    line.insertBefore(fold, line.querySelector('.content'));
    group.append(line, body);
    setOpen(group, false);
    line.addEventListener('click', (ev) => {
      if (ev.target.closest('a')) return; // the line's number links to it
      setOpen(group, group.dataset.open !== 'true');
    });
    this.container = body;
  }

  // highlight marks the line the URL's #L<n> names and scrolls to it, or
  // does so once that line has arrived.
  highlight() {
    const m = /^#L(\d+)$/.exec(location.hash);
    this.wanted = false;
    if (!m) return;
    const el = document.getElementById(`L${m[1]}`);
    if (!el) {
      this.wanted = true;
      return;
    }
    if (this.marked) this.marked.classList.remove('highlight');
    // A line folded in a group shows its group.
    const body = el.closest('.group-body');
    if (body) setOpen(body.parentElement, true);
    el.classList.add('highlight');
    this.marked = el;
    this.setFollow(false);
    el.scrollIntoView({ block: 'center' });
  }

  // stop stops following the log.
  stop() {
    this.closed = true;
    if (this.es) this.es.close();
    this.es = null;
    clearTimeout(this.timer);
  }

  /** close stops following the log and listening to the URL. */
  close() {
    this.stop();
    window.removeEventListener('hashchange', this.onHash);
  }
}
