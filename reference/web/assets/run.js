// The run page: the run's header, cancel and retry, its jobs as a graph,
// and the annotations its jobs' steps attached, re-read every second
// until the run is finished.

import * as api from './api.js';
import { DagView } from './dag.js';
import { admissionText, badge, duration, errorBox, h, pagePath, poll, runDone, shortSHA, time } from './util.js';

// annotationItem is one annotation of job j: its level, the job (a link
// to its page), where in the repository, its title and message.
function annotationItem(runID, j, a) {
  const where = a.file ? `${a.file}${a.line ? ':' + a.line : ''}${a.col ? ':' + a.col : ''}` : '';
  return h('li', {
    class: `annotation ${a.level}`, 'data-testid': 'run-annotation', 'data-level': a.level, 'data-job': j.id,
    'data-file': a.file || '', 'data-line': a.line || '',
  },
  h('strong', {}, a.level), ' in ',
  h('a', { href: pagePath(runID, j.id) }, j.name || j.id), a.step ? ` (${a.step})` : '', ': ',
  where ? h('span', { class: 'mono where' }, where) : null, where ? ' ' : '',
  a.title ? h('strong', {}, a.title) : null, a.title ? ' — ' : '',
  a.message);
}

/** mountRun shows run runID in root. */
export function mountRun(root, runID) {
  const ctrl = new AbortController();
  const err = errorBox('load-error');
  const actErr = errorBox('error');
  const title = h('h1', {}, runID);
  const facts = h('dl', { class: 'facts' });
  const cancel = h('button', { type: 'button', 'data-testid': 'cancel', disabled: true }, 'Cancel');
  const retry = h('button', { type: 'button', 'data-testid': 'retry', disabled: true }, 'Retry failed');
  const graph = h('div', { class: 'graph' }, h('p', { class: 'muted' }, 'Loading…'));
  const dag = new DagView(graph);
  const annotations = h('ul', { class: 'annotations', 'data-testid': 'run-annotations' });
  const annotationsBox = h('section', { hidden: true }, h('h2', {}, 'Annotations'), annotations);
  root.append(h('div', { class: 'head' }, title, h('div', { class: 'actions' }, cancel, retry)), err.el, actErr.el, facts, graph, annotationsBox);

  function fact(name, value, attrs) {
    return [h('dt', {}, name), h('dd', attrs || {}, value)];
  }

  function render(run) {
    title.textContent = run.pipeline || run.id;
    facts.replaceChildren(
      ...fact('State', badge(run.state, false, { 'data-testid': 'run-state' })),
      ...fact('Branch', run.branch || '—'),
      ...fact('Commit', h('span', { class: 'mono', title: run.sha || '' }, shortSHA(run.sha) || '—')),
      ...fact('Created', time(run.created_at)),
      ...fact('Duration', duration(run.duration_ns), { 'data-testid': 'run-duration' }),
      ...fact('Critical path', duration(run.critical_path_ns), { 'data-testid': 'critical-path-duration' }),
      ...(run.held ? fact('Held', run.held, { 'data-testid': 'run-held' }) : []),
      ...((run.policy || []).length ? fact('Policy', run.policy.map((d) => h('div', { 'data-job': d.job },
        h('a', { href: pagePath(runID, d.job) }, d.job), `: ${admissionText(d)}`)), { 'data-testid': 'run-policy' }) : []),
    );
    const done = runDone(run.state);
    cancel.disabled = done;
    retry.disabled = !done;
    dag.update(run);
    const items = (run.jobs || []).flatMap((j) => (j.annotations || []).map((a) => annotationItem(runID, j, a)));
    annotations.replaceChildren(...items);
    annotationsBox.hidden = items.length === 0;
    document.title = `${run.pipeline || run.id} · cikit`;
  }

  let finished = false;
  const p = poll(async () => {
    try {
      const run = await api.get(api.runPath(runID), ctrl.signal);
      render(run);
      finished = runDone(run.state);
      err.set(null);
    } catch (e) {
      if (ctrl.signal.aborted) return false;
      err.set(`Could not load the run: ${e.message}`);
      return e.status !== 404;
    }
    return !finished;
  }, 1000);

  async function act(button, verb) {
    button.disabled = true;
    try {
      actErr.set(null);
      render(await api.post(`${api.runPath(runID)}/${verb}`, ctrl.signal));
    } catch (e) {
      if (ctrl.signal.aborted) return;
      actErr.set(`Could not ${verb} the run: ${e.message}`);
    }
    p.now();
  }
  cancel.addEventListener('click', () => act(cancel, 'cancel'));
  retry.addEventListener('click', () => act(retry, 'retry'));

  return () => {
    p.stop();
    ctrl.abort();
  };
}
