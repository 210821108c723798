// The job page: the job's state and times, why it waits, the approval a
// gated job waits for, its attempts, and its log followed live. The job is re-read every second until it is
// finished.

import * as api from './api.js';
import { LogView } from './log.js';
import { admissionText, badge, duration, errorBox, h, jobDone, pagePath, poll, time } from './util.js';

const WAITING = ['pending', 'manual', 'delayed', 'ready', 'queued'];

/** cacheLine says how a cache was restored and saved. */
function cacheLine(c) {
  const hit = c.hit ? (c.exact ? 'hit' : `restored from ${c.matched_key}`) : 'miss';
  const parts = [`${c.key}: ${hit}`];
  if (c.hit) parts.push(`${bytes(c.size || 0)} in ${c.restored_in_ms || 0} ms`);
  if (c.saved) parts.push(`saved ${bytes(c.saved_size || 0)}`);
  else if (c.note) parts.push(c.note);
  return h('div', { class: `cache ${c.hit ? 'hit' : 'miss'}`, 'data-hit': String(!!c.hit) }, parts.join(' · '));
}

/** artifactLine links an artifact's download. */
function artifactLine(a) {
  const label = a.type === 'report' ? `${a.name} (${a.report} report)` : a.name;
  return h('div', { class: 'artifact' },
    h('a', { href: a.download_url, download: '', 'data-testid': 'artifact-link' }, label),
    ` · ${bytes(a.size)} · sha256 ${a.sha256.slice(0, 12)}…${a.expires_at ? ' · expires ' + new Date(a.expires_at).toLocaleDateString() : ''}`);
}

/**
 * imageLine names the image a job ran in: its reference as the job asked
 * for it and the digest it ran on, shortened, "alpine:3.19 @
 * sha256:0123456789ab…", the whole digest in a tooltip; null for a job on
 * the host.
 */
function imageLine(j) {
  const digest = j.image_digest || '';
  let ref = j.image || '';
  // A reference pinned to its digest names it once.
  if (digest && ref.endsWith(`@${digest}`)) ref = ref.slice(0, -digest.length - 1);
  if (!digest) return ref || null;
  const short = h('span', { class: 'mono', title: digest }, `${digest.slice(0, 'sha256:'.length + 12)}…`);
  return ref ? [`${ref} @ `, short] : [short];
}

/** gateLine says why a gate holds a job, who may approve it, and its timers. */
function gateLine(g) {
  const parts = [(g.reasons || []).join('; ')];
  if ((g.reviewers || []).length) parts.push(`reviewers ${g.reviewers.join(', ')}`);
  if (g.wait_timer_ns) parts.push(`runs ${duration(g.wait_timer_ns)} after its approval`);
  if (g.expires_at) parts.push(`expires ${time(g.expires_at)} without a decision`);
  else if (g.expires_ns) parts.push(`expires after ${duration(g.expires_ns)} without a decision`);
  return parts.filter(Boolean).join(' · ');
}

/** admissionLines are what the policy decided for a job, and what it lets the job have. */
function admissionLines(ad) {
  const perms = Object.entries(ad.token_permissions || {}).sort().map(([k, v]) => `${k}: ${v}`);
  return [
    h('div', { 'data-testid': 'admission' }, admissionText(ad)),
    ...[
      ['secrets from', (ad.secrets_scopes || []).join(', ') || 'none'],
      ['cache scope', ad.cache_scope],
      ['token', perms.join(', ')],
      ['runners', (ad.runner_labels_allowed || []).join(' ')],
      ['policy', ad.policy],
    ].filter(([, v]) => v).map(([k, v]) => h('div', { class: 'muted' }, `${k} ${v}`)),
  ];
}

/** approvalLine is one decision on a job's gate. */
function approvalLine(a) {
  const what = a.decision === 'approve' ? 'approved' : 'rejected';
  return h('div', { class: `decision ${a.decision}`, 'data-testid': 'approval-record' },
    `${what} by ${a.login}${a.comment ? ': ' + a.comment : ''} · ${time(a.at)}${a.attempt > 1 ? ` (attempt ${a.attempt})` : ''}`);
}

/** bytes is n bytes in binary units. */
function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

/** mountJob shows job jobID of run runID in root; query's "attempt" picks an earlier attempt. */
export function mountJob(root, runID, jobID, query) {
  const ctrl = new AbortController();
  const err = errorBox('load-error');
  const explicit = Number.parseInt(query.get('attempt') || '', 10) || 0;
  const title = h('h1', {}, jobID);
  const facts = h('dl', { class: 'facts' });
  const why = h('p', { class: 'why', 'data-testid': 'why', hidden: true });
  // A manual job waits for a person: this button starts it.
  const start = h('button', { type: 'button', class: 'start', 'data-testid': 'start', hidden: true }, 'Start');
  const startErr = errorBox('start-error');
  // A gated job waits for approval: whom and why, a comment, and the two
  // decisions, or a link to sign in first.
  const approvalWho = h('p', { 'data-testid': 'approval-waiting' });
  const comment = h('textarea', {
    'data-testid': 'approval-comment', rows: 2, maxlength: 512, 'aria-label': 'Comment',
    placeholder: 'Comment (optional to approve, needed to reject)',
  });
  const approve = h('button', { type: 'button', class: 'approve', 'data-testid': 'approve' }, 'Approve');
  const reject = h('button', { type: 'button', class: 'reject', 'data-testid': 'reject' }, 'Reject');
  const decide = h('div', { class: 'decide' }, comment, h('div', {}, approve, reject));
  const signIn = h('a', { 'data-testid': 'sign-in', hidden: true }, 'Sign in to approve or reject it');
  const approvalErr = errorBox('approval-error');
  const approval = h('section', { class: 'approval', 'data-testid': 'approval', hidden: true },
    approvalWho, decide, signIn, approvalErr.el);
  const attempts = h('nav', { class: 'attempts', 'data-testid': 'attempts' });
  const annotations = h('ul', { class: 'annotations', 'data-testid': 'annotations', hidden: true });
  const logSlot = h('div');
  root.append(
    h('p', { class: 'crumbs' }, h('a', { href: pagePath(runID), 'data-testid': 'run-link' }, `Run ${runID}`)),
    title, err.el, startErr.el, approval, facts, why, annotations, attempts, logSlot,
  );

  let job = null;
  let log = null;
  // session is who is signed in (api.me): undefined until asked, null
  // for a platform without sign-in.
  let session;
  let deciding = false;

  async function askSession() {
    try {
      session = await api.me(ctrl.signal);
    } catch (e) {
      if (ctrl.signal.aborted) return;
      session = null; // a failing /me: let the API say what is wrong
    }
    showSession();
  }

  function showSession() {
    const out = session && !session.signedIn;
    decide.hidden = out;
    signIn.hidden = !out;
    signIn.href = `/auth/login?next=${encodeURIComponent(location.pathname + location.search)}`;
  }

  function fact(name, value, attrs) {
    return value === undefined || value === null || value === '' ? [] : [h('dt', {}, name), h('dd', attrs || {}, value)];
  }

  function render(j) {
    title.textContent = j.name || j.id;
    document.title = `${j.name || j.id} · cikit`;
    const waitingOn = (j.waiting_on || []).flatMap((id, i) => [i ? ', ' : '', h('a', { href: pagePath(runID, id) }, id)]);
    facts.replaceChildren(
      ...fact('State', [badge(j.state, j.allow_failure, { 'data-testid': 'job-state' }), start]),
      ...fact('Waiting for', j.waiting_for, { 'data-testid': 'waiting-for' }),
      ...fact('Delayed until', j.delayed_until && time(j.delayed_until)),
      ...fact('Gate', j.gate ? gateLine(j.gate) : null, { 'data-testid': 'job-gate' }),
      ...fact('Approvals', (j.approvals || []).length ? j.approvals.map(approvalLine) : null, { 'data-testid': 'job-approvals' }),
      ...fact('Policy', j.admission ? admissionLines(j.admission) : null),
      ...fact('Attempt', String(j.attempt), { 'data-testid': 'job-attempt' }),
      ...fact('Stage', j.stage),
      ...fact('Runs on', (j.runs_on || []).join(', ')),
      ...fact('Runner', j.runner),
      ...fact('Waiting on', waitingOn.length ? waitingOn : null, { 'data-testid': 'waiting-on' }),
      ...fact('Queued for', j.queue_duration_ns ? duration(j.queue_duration_ns) : null),
      ...fact('Ran for', j.started_at ? duration(j.run_duration_ns) : null),
      ...fact('Started', j.started_at && time(j.started_at)),
      ...fact('Finished', j.finished_at && time(j.finished_at)),
      ...fact('Exit code', j.exit_code === undefined ? null : String(j.exit_code)),
      ...fact('Reason', j.reason),
      ...fact('Allowed to fail', j.allow_failure ? 'yes' : null),
      ...fact('Commit', j.commit, { 'data-testid': 'job-commit' }),
      ...fact('Checkout took', j.commit ? duration(j.checkout_duration_ns || 0) : null),
      ...fact('Image', imageLine(j), { 'data-testid': 'job-image' }),
      ...fact('Outputs', j.outputs ? Object.keys(j.outputs).sort().map((k) => h('div', {}, `${k} = ${j.outputs[k]}`)) : null,
        { 'data-testid': 'job-outputs' }),
      ...fact('Environment', (j.env_names || []).join(', '), { 'data-testid': 'job-env-names' }),
      ...fact('Caches', (j.cache_results || []).length ? j.cache_results.map(cacheLine) : null, { 'data-testid': 'job-caches' }),
      ...fact('Artifacts', (j.artifacts || []).length ? j.artifacts.map(artifactLine) : null, { 'data-testid': 'job-artifacts' }),
    );
    // Annotations: what the steps attached with ::error, ::warning and ::notice.
    annotations.replaceChildren(...(j.annotations || []).map((a) => {
      const where = a.file ? `${a.file}${a.line ? ':' + a.line : ''}: ` : '';
      return h('li', { class: `annotation ${a.level}`, 'data-level': a.level },
        `${a.level}${a.step ? ' in ' + a.step : ''}: ${where}${a.title ? a.title + ' — ' : ''}${a.message}`);
    }));
    annotations.hidden = !(j.annotations || []).length;
    start.hidden = j.state !== 'manual' || !!j.gate;
    start.disabled = false;
    const gated = j.state === 'manual' && !!j.gate;
    approval.hidden = !gated;
    approvalWho.textContent = gated ? `Waiting for ${j.waiting_for}` : '';
    approve.disabled = reject.disabled = deciding;
    if (gated && session === undefined) {
      session = null; // asked once
      askSession();
    }
    const past = (j.attempts || []).map((a) => a.attempt).filter((n) => n !== j.attempt);
    const shown = explicit || j.attempt;
    attempts.replaceChildren(...(past.length === 0 ? [] : [
      'Attempts: ',
      ...[...past, j.attempt].sort((a, b) => a - b).flatMap((n, i) => [
        i ? ' · ' : '',
        n === shown ? h('strong', {}, String(n)) : h('a', { href: `${pagePath(runID, jobID)}${n === j.attempt ? '' : `?attempt=${n}`}` }, String(n)),
      ]),
    ]));
  }

  async function explain() {
    try {
      const w = await api.get(`${api.jobPath(runID, jobID)}/why`, ctrl.signal);
      const parts = [w.message || w.code];
      if (w.pool) parts.push(`pool ${w.pool}`);
      if (w.eta_ns) parts.push(`expected in about ${duration(w.eta_ns)}`);
      why.textContent = 'Waiting: ' + parts.filter(Boolean).join(' · ');
      why.hidden = false;
    } catch (e) {
      if (!ctrl.signal.aborted) why.hidden = true;
    }
  }

  // follow shows the log of attempt, replacing the one shown.
  function follow(attempt) {
    if (log) log.close();
    log = new LogView(runID, jobID, attempt, () => !(job && jobDone(job.state) && !job.started_at && attempt === job.attempt));
    logSlot.replaceChildren(log.el);
  }
  if (explicit) follow(explicit);

  const p = poll(async () => {
    try {
      job = await api.get(api.jobPath(runID, jobID), ctrl.signal);
      err.set(null);
    } catch (e) {
      if (ctrl.signal.aborted) return false;
      err.set(`Could not load the job: ${e.message}`);
      return e.status !== 404;
    }
    render(job);
    if (!explicit && (!log || log.attempt !== job.attempt)) follow(job.attempt);
    if (WAITING.includes(job.state)) await explain();
    else why.hidden = true;
    return !jobDone(job.state);
  }, 1000);

  start.addEventListener('click', async () => {
    start.disabled = true;
    try {
      startErr.set(null);
      await api.post(`${api.jobPath(runID, jobID)}/start`, ctrl.signal);
    } catch (e) {
      if (ctrl.signal.aborted) return;
      startErr.set(`Could not start the job: ${e.message}`);
    }
    p.now();
  });

  async function send(verb) {
    deciding = true;
    approve.disabled = reject.disabled = true;
    const headers = session && session.csrf_token ? { 'X-CSRF-Token': session.csrf_token } : {};
    try {
      approvalErr.set(null);
      await api.postJSON(`${api.jobPath(runID, jobID)}/${verb}`, { comment: comment.value }, headers, ctrl.signal);
      comment.value = '';
    } catch (e) {
      if (ctrl.signal.aborted) return;
      approvalErr.set(`Could not ${verb} the job: ${e.message}`);
    } finally {
      deciding = false;
    }
    p.now();
  }
  approve.addEventListener('click', () => send('approve'));
  reject.addEventListener('click', () => send('reject'));

  return () => {
    p.stop();
    ctrl.abort();
    if (log) log.close();
  };
}
