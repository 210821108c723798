// The app's entry point: a router over the page paths. Links to pages are
// followed without reloading; each page stops its polling and streams when
// it is left.

import { prefix } from './api.js';
import { mountJob } from './job.js';
import { mountRun } from './run.js';
import { mountRuns } from './runs.js';
import { h } from './util.js';

const main = document.getElementById('main');
let leave = null;
let shown = null;

function notFound() {
  main.append(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '/' }, 'All runs')));
  return null;
}

function route() {
  const here = location.pathname + location.search;
  if (here === shown) return; // only the fragment changed: the page handles it
  shown = here;
  if (leave) leave();
  leave = null;
  main.replaceChildren();
  document.title = 'cikit';
  let parts;
  try {
    parts = location.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    leave = notFound();
    return;
  }
  const query = new URLSearchParams(location.search);
  if (parts.length === 0) leave = mountRuns(main, query);
  else if (parts[0] === 'runs' && parts.length === 2) leave = mountRun(main, parts[1]);
  else if (parts[0] === 'runs' && parts.length === 4 && parts[2] === 'jobs') leave = mountJob(main, parts[1], parts[3], query);
  else leave = notFound();
}

// navigate shows the page of url without reloading.
function navigate(url) {
  history.pushState(null, '', url);
  route();
  if (!location.hash) window.scrollTo(0, 0);
}

document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest('a');
  if (!a || a.hasAttribute('target') || a.hasAttribute('download')) return;
  const href = a.getAttribute('href');
  if (!href || href.startsWith('#')) return;
  const u = new URL(href, location.href);
  if (u.origin !== location.origin || u.pathname.startsWith('/assets/') || u.pathname.startsWith(prefix + '/')) return;
  e.preventDefault();
  navigate(u.pathname + u.search + u.hash);
});
window.addEventListener('popstate', route);
route();
