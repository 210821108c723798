// Small helpers shared by the pages: building elements, formatting.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** h builds an HTML element; strings among children become text nodes. */
export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);

/** s builds an SVG element. */
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

/** Terminal states of jobs and of runs. */
export const jobDone = (state) => ['succeeded', 'failed', 'skipped', 'cancelled'].includes(state);
export const runDone = (state) => ['succeeded', 'failed', 'cancelled'].includes(state);

/** stateClass is the CSS class of a state; a failure allowed to fail has its own. */
export const stateClass = (state, allowFailure) =>
  'state-' + (state === 'failed' && allowFailure ? 'failed-allowed' : state);

/** badge is a state's label, coloured by state. */
export function badge(state, allowFailure, attrs) {
  const label = state === 'failed' && allowFailure ? 'failed (allowed)' : state.replace('_', ' ');
  return h('span', { class: `badge ${stateClass(state, allowFailure)}`, 'data-state': state, ...attrs }, label);
}

/** duration formats integer nanoseconds as "1h 2m", "3m 4s", "5.6s" or "78ms". */
export function duration(ns) {
  if (ns === undefined || ns === null) return '—';
  const ms = Math.round(ns / 1e6);
  if (ms < 1000) return `${ms}ms`;
  const sec = ms / 1000;
  if (sec < 60) return `${sec.toFixed(1)}s`;
  const total = Math.floor(sec);
  const hh = Math.floor(total / 3600);
  const mm = Math.floor((total % 3600) / 60);
  const ss = total % 60;
  return hh > 0 ? `${hh}h ${mm}m` : `${mm}m ${ss}s`;
}

/** time formats an RFC 3339 time in the browser's locale, or "—". */
export function time(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** shortSHA is the first 8 characters of a commit. */
export const shortSHA = (sha) => (sha || '').slice(0, 8);

/** pagePath is the UI path of a run, or of one of its jobs. */
export function pagePath(run, job) {
  const p = `/runs/${encodeURIComponent(run)}`;
  return job === undefined ? p : `${p}/jobs/${encodeURIComponent(job)}`;
}

/**
 * poll calls fn now and then again every interval ms after each call
 * settles, while fn returns true. It returns a function that stops it and
 * one that restarts it at once.
 */
export function poll(fn, interval) {
  let timer = null;
  let stopped = false;
  let running = false;
  let again = false;
  async function tick() {
    timer = null;
    if (running) {
      again = true;
      return;
    }
    running = true;
    let more = true;
    try {
      more = await fn();
    } finally {
      running = false;
    }
    if (stopped) return;
    if (again) {
      again = false;
      tick();
    } else if (more) {
      timer = setTimeout(tick, interval);
    }
  }
  tick();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    now() {
      if (stopped) return;
      clearTimeout(timer);
      tick();
    },
  };
}

const DECISIONS = { allow: 'allowed', require_approval: 'held', deny: 'denied' };

/**
 * admissionText says what the platform's policy decided for a job:
 * "held: fork pull request by a first-time contributor".
 */
export function admissionText(ad) {
  const label = DECISIONS[ad.decision] || ad.decision;
  return ad.reason ? `${label}: ${ad.reason}` : label;
}

/** errorBox shows messages of failed requests; set(null) hides it. */
export function errorBox(testid) {
  const el = h('div', { class: 'error', 'data-testid': testid, role: 'alert', hidden: true });
  return {
    el,
    set(msg) {
      el.hidden = !msg;
      el.textContent = msg || '';
    },
  };
}
