// The runs page: newest first, a page at a time, refreshed every 2 s.

import * as api from './api.js';
import { badge, duration, errorBox, h, pagePath, poll, shortSHA, time } from './util.js';

const PAGE = 25;

/** mountRuns shows the runs page in root; query's "before" is the page's cursor. */
export function mountRuns(root, query) {
  const before = query.get('before') || '';
  const ctrl = new AbortController();
  const err = errorBox('load-error');
  const body = h('tbody', { 'data-testid': 'runs' });
  const pager = h('nav', { class: 'pager' });
  root.append(
    h('h1', {}, 'Runs'),
    err.el,
    h('table', { class: 'runs' },
      h('thead', {}, h('tr', {}, ['Pipeline', 'Branch', 'Commit', 'State', 'Created', 'Duration'].map((t) => h('th', {}, t)))),
      body),
    pager,
  );

  function render(page) {
    const runs = page.runs || [];
    body.replaceChildren(...runs.map((r) => {
      const link = pagePath(r.id);
      return h('tr', { 'data-testid': 'run-row', 'data-run': r.id },
        h('td', {}, h('a', { href: link }, r.pipeline || r.id)),
        h('td', {}, r.branch || '—'),
        h('td', { class: 'mono', title: r.sha || '' }, shortSHA(r.sha) || '—'),
        h('td', {}, badge(r.state)),
        h('td', {}, time(r.created_at)),
        h('td', {}, duration(r.duration_ns)));
    }));
    if (runs.length === 0) {
      body.append(h('tr', {}, h('td', { colspan: 6, class: 'empty' }, before ? 'No older runs.' : 'No runs yet.')));
    }
    pager.replaceChildren(
      before ? h('a', { href: '/' }, '« Newest') : '',
      page.next ? h('a', { href: '/?' + new URLSearchParams({ before: page.next }), 'data-testid': 'next' }, 'Older »') : '',
    );
  }

  const p = poll(async () => {
    const q = new URLSearchParams({ limit: PAGE });
    if (before) q.set('before', before);
    try {
      render(await api.get('/runs?' + q, ctrl.signal));
      err.set(null);
    } catch (e) {
      if (ctrl.signal.aborted) return false;
      err.set(`Could not load the runs: ${e.message}`);
    }
    return true;
  }, 2000);

  return () => {
    p.stop();
    ctrl.abort();
  };
}
