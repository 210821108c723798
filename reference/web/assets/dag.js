// The graph of a run's jobs, drawn as SVG: a column per layer (the longest
// chain of needs to a job), a box per job coloured by its state, an edge
// from each need to the job, the critical path highlighted. The layout
// depends only on the jobs and their needs, so updates keep every box in
// place and only change states and highlights.

import { pagePath, s, stateClass } from './util.js';

const W = 184;
const H = 46;
const GAP_X = 64;
const GAP_Y = 18;
const PAD = 12;
const MAX_NAME = 22;

// layout places the jobs: it returns each job's layer and row, and the
// number of layers and rows.
function layout(jobs) {
  const byID = new Map(jobs.map((j, i) => [j.id, { job: j, index: i }]));
  const layerOf = new Map();
  const visiting = new Set();
  const needs = (id) => (byID.get(id).job.needs || []).filter((n) => byID.has(n));
  function depth(id) {
    if (layerOf.has(id)) return layerOf.get(id);
    if (visiting.has(id)) return 0; // a cycle, which a valid plan never has
    visiting.add(id);
    let d = 0;
    for (const n of needs(id)) d = Math.max(d, depth(n) + 1);
    layerOf.set(id, d);
    return d;
  }
  const layers = [];
  for (const j of jobs) {
    const l = depth(j.id);
    (layers[l] ||= []).push(j.id);
  }
  const filled = layers.filter(Boolean);
  const rows = Math.max(1, ...filled.map((l) => l.length));
  // Within a layer, jobs sit near the mean height of their needs (fewer
  // crossings), ties in plan order.
  const y = new Map();
  const pos = new Map();
  filled.forEach((ids, l) => {
    if (l > 0) {
      const mean = (id) => {
        const ns = needs(id).filter((n) => y.has(n));
        return ns.length ? ns.reduce((sum, n) => sum + y.get(n), 0) / ns.length : 0;
      };
      const m = new Map(ids.map((id) => [id, mean(id)]));
      ids.sort((a, b) => m.get(a) - m.get(b) || byID.get(a).index - byID.get(b).index);
    }
    const offset = (rows - ids.length) / 2;
    ids.forEach((id, i) => {
      y.set(id, offset + i);
      pos.set(id, { layer: l, row: offset + i });
    });
  });
  return { pos, layers: filled.length, rows };
}

const clip = (name) => (name.length > MAX_NAME ? name.slice(0, MAX_NAME - 1) + '…' : name);

/** DagView draws a run's jobs into container and updates the drawing in place. */
export class DagView {
  constructor(container) {
    this.container = container;
    this.key = null;
    this.nodes = new Map();
    this.edges = [];
  }

  /** update draws run, laying it out anew only when its jobs or needs changed. */
  update(run) {
    const jobs = run.jobs || [];
    const key = JSON.stringify(jobs.map((j) => [j.id, j.needs || []]));
    if (key !== this.key) {
      this.build(run.id, jobs);
      this.key = key;
    }
    const path = run.critical_path || [];
    const onPath = new Set(path);
    const pathEdges = new Set(path.slice(1).map((id, i) => path[i] + '\n' + id));
    for (const j of jobs) {
      const n = this.nodes.get(j.id);
      const critical = onPath.has(j.id);
      const cls = `node ${stateClass(j.state, j.allow_failure)}${critical ? ' critical' : ''}`;
      if (n.el.getAttribute('class') !== cls) n.el.setAttribute('class', cls);
      n.el.setAttribute('data-state', j.state);
      n.el.setAttribute('data-critical', String(critical));
      const caches = j.cache_results || [];
      const hits = caches.filter((c) => c.hit).length;
      const cache = caches.length ? ` · cache ${hits}/${caches.length}` : '';
      n.el.setAttribute('data-cache-hits', String(hits));
      const label = (j.state === 'failed' && j.allow_failure ? 'failed (allowed)' : j.state.replace('_', ' ')) + cache;
      if (n.state.textContent !== label) n.state.textContent = label;
      const hitText = caches.map((c) => `${c.key}: ${c.hit ? (c.exact ? 'hit' : 'restored from ' + c.matched_key) : 'miss'}`).join('; ');
      n.title.textContent = `${j.name || j.id}: ${label}${j.reason ? ' — ' + j.reason : ''}${hitText ? ' — cache ' + hitText : ''}`;
    }
    for (const e of this.edges) {
      const critical = pathEdges.has(e.from + '\n' + e.to);
      e.el.setAttribute('data-critical', String(critical));
      e.el.setAttribute('class', critical ? 'edge critical' : 'edge');
      e.el.setAttribute('marker-end', critical ? 'url(#arrow-critical)' : 'url(#arrow)');
    }
  }

  build(runID, jobs) {
    const { pos, layers, rows } = layout(jobs);
    const width = PAD * 2 + layers * W + (layers - 1) * GAP_X;
    const height = PAD * 2 + rows * H + (rows - 1) * GAP_Y;
    const at = (id) => {
      const p = pos.get(id);
      return { x: PAD + p.layer * (W + GAP_X), y: PAD + p.row * (H + GAP_Y) };
    };
    const arrow = (id, cls) =>
      s('marker', { id, viewBox: '0 0 8 8', refX: 8, refY: 4, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto' },
        s('path', { d: 'M0,0 L8,4 L0,8 z', class: cls }));
    const edgeGroup = s('g', { class: 'edges' });
    const nodeGroup = s('g', { class: 'nodes' });
    const svg = s('svg', {
      'data-testid': 'dag', class: 'dag', width, height, viewBox: `0 0 ${width} ${height}`,
      role: 'img', 'aria-label': 'Jobs and their needs',
    }, s('defs', {}, arrow('arrow', 'arrowhead'), arrow('arrow-critical', 'arrowhead critical')), edgeGroup, nodeGroup);

    this.nodes = new Map();
    this.edges = [];
    const ids = new Set(jobs.map((j) => j.id));
    for (const j of jobs) {
      for (const need of j.needs || []) {
        if (!ids.has(need)) continue;
        const a = at(need);
        const b = at(j.id);
        const x1 = a.x + W;
        const y1 = a.y + H / 2;
        const x2 = b.x - 2;
        const y2 = b.y + H / 2;
        const dx = Math.max(24, (x2 - x1) / 2);
        const el = s('path', {
          'data-testid': 'dag-edge', 'data-from': need, 'data-to': j.id,
          d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`,
        });
        edgeGroup.append(el);
        this.edges.push({ from: need, to: j.id, el });
      }
      const p = at(j.id);
      const title = s('title');
      const state = s('text', { class: 'state', x: p.x + 12, y: p.y + 34 });
      const el = s('a', { href: pagePath(runID, j.id), 'data-testid': 'dag-node', 'data-job': j.id },
        title,
        s('rect', { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
        s('text', { class: 'name', x: p.x + 12, y: p.y + 18 }, clip(j.name || j.id)),
        state);
      nodeGroup.append(el);
      this.nodes.set(j.id, { el, state, title });
    }
    this.container.replaceChildren(svg);
  }
}
