// delegate view: plain JavaScript, no build step, no network beyond this
// server. Pages are routed on the URL's hash.
'use strict';

const main = document.getElementById('main');
const SVGNS = 'http://www.w3.org/2000/svg';
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
let streams = []; // EventSources of the current page
let refreshTimer = null; // reloads a page while its files are being read

// h builds an element: h('td', {class: 'num'}, 'text', child...).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    el.append(k instanceof Node ? k : String(k));
  }
  return el;
}

// s builds an SVG element.
function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}

async function api(path) {
  const r = await fetch(path, {credentials: 'same-origin', headers: {Accept: 'application/json'}});
  const body = await r.json();
  if (!r.ok) throw new Error((body.error && body.error.message) || r.statusText);
  return body;
}

function show(...kids) {
  main.replaceChildren(...kids.flat().filter(k => k !== null && k !== undefined && k !== false));
}

function fail(err) {
  show(h('p', {class: 'error'}, 'error: ' + err.message));
}

const fmt = {
  num(v, d = 3) { return v === null || v === undefined ? 'n/a' : Number(v).toFixed(d); },
  usd(v) {
    if (v === null || v === undefined) return 'n/a';
    if (v === 0) return '$0';
    return '$' + (Math.abs(v) >= 0.01 ? v.toFixed(4) : v.toPrecision(3));
  },
  ci(a) { return a && a[0] !== null && a[1] !== null ? '[' + fmt.num(a[0]) + ', ' + fmt.num(a[1]) + ']' : ''; },
  ciUSD(a) { return a ? '[' + fmt.usd(a[0]) + ', ' + (a[1] === null ? '∞' : fmt.usd(a[1])) + ']' : ''; },
  ms(v) { return v >= 1000 ? (v / 1000).toFixed(2) + ' s' : v.toFixed(0) + ' ms'; },
  tokens(u) { return u.prompt_tokens + '→' + u.completion_tokens + ' tok'; },
};

// progressNote says how much of a large file the server has read, and
// reloads the page until it has read all of it.
function progressNote(p) {
  if (!p || p.complete) return null;
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(route, 1000);
  return h('p', {class: 'muted progress'}, 'reading the files: ' + (p.bytes / 1e6).toFixed(1) + ' of ' + (p.of / 1e6).toFixed(1) +
    ' MB so far; the figures cover what is read, and the page reloads until it is all read');
}

// ---- runs ----

async function pageRuns() {
  const {runs} = await api('/api/runs');
  const link = r => {
    switch (r.kind) {
      case 'trace': return '#/trace/' + r.id;
      case 'bench': return '#/bench/' + r.id;
      case 'rollouts': return '#/rollouts/' + r.id;
      case 'train': return '#/train/' + r.id;
      case 'gateway': return '#/gateway/' + r.id;
    }
  };
  const what = {trace: 'calls', bench: 'results', rollouts: 'rollouts', train: 'steps', gateway: 'sessions'};
  show(h('h1', {}, 'Runs'),
    h('table', {id: 'runs'},
      h('tr', {}, h('th', {}, 'kind'), h('th', {}, 'file'), h('th', {class: 'num'}, 'records')),
      runs.map(r => h('tr', {class: 'click', onclick: () => { location.hash = link(r); }},
        h('td', {}, r.kind), h('td', {}, h('a', {href: link(r)}, r.name)),
        h('td', {class: 'num'}, r.error ? h('span', {class: 'error'}, r.error) : r.count + ' ' + what[r.kind])))));
}

// ---- traces ----

function messageEl(m) {
  return h('div', {class: 'msg'},
    h('span', {class: 'role'}, m.role + (m.name ? ' (' + m.name + ')' : '') + (m.tool_call_id ? ' ← ' + m.tool_call_id : '')),
    m.content ? h('pre', {}, m.content) : null,
    (m.tool_calls || []).map(tc => h('div', {class: 'toolcall'}, h('span', {class: 'tag'}, 'tool call ' + tc.name + ' ' + tc.id), h('pre', {}, tc.arguments))));
}

function totalsText(t) {
  return t.calls + ' calls, ' + fmt.tokens(t.usage) + ', ' + fmt.usd(t.cost) + (t.errors ? ', ' + t.errors + ' errors' : '') + (t.retries ? ', ' + t.retries + ' retries' : '');
}

function nodeEl(n, open) {
  const call = !!n.model;
  const cls = ['node', call ? 'call' : 'group', n.critical ? 'critical' : '', n.error ? 'failed' : '', open ? 'open' : ''].filter(Boolean).join(' ');
  const head = h('div', {class: 'head'},
    h('span', {class: 'toggle'}, '▸ '),
    h('b', {}, n.name), ' ',
    n.role ? h('span', {class: 'tag'}, n.role) : null,
    n.model ? h('span', {class: 'tag'}, n.model) : null,
    n.critical ? h('span', {class: 'tag crit', title: 'on the critical path'}, 'critical') : null,
    call ? fmt.tokens(n.usage) + ', ' + fmt.usd(n.cost) + ', ' + fmt.ms(n.latency_ms) + (n.retries ? ', ' + n.retries + ' retries' : '') : h('span', {class: 'muted'}, 'subtotal: ' + totalsText(n.subtotal)),
    n.error ? h('span', {class: 'error'}, ' error: ' + n.error) : null);
  const body = h('div', {class: 'body'},
    n.error ? h('pre', {class: 'error'}, n.error + (n.error_status ? ' (HTTP ' + n.error_status + ')' : '') + (n.error_type ? ' [' + n.error_type + ']' : '')) : null,
    (n.messages || []).map(messageEl),
    n.output ? h('div', {}, h('span', {class: 'muted'}, 'output' + (n.finish_reason ? ' (' + n.finish_reason + ')' : '')), messageEl(n.output)) : null,
    (n.children || []).map(c => nodeEl(c, false)));
  const el = h('div', {class: cls, 'data-id': n.id}, head, body);
  head.addEventListener('click', () => el.classList.toggle('open'));
  return el;
}

async function pageTrace(run, rec, which) {
  let q = '/api/trace?run=' + run;
  if (rec !== undefined) q += '&rec=' + rec;
  if (which) q += '&which=' + which;
  const t = await api(q);
  const roles = Object.keys(t.roles || {}).sort();
  show(h('h1', {}, 'Trace: ' + t.strategy),
    h('p', {}, h('b', {}, 'request: '), t.request),
    t.failure ? h('p', {class: 'error'}, 'failure: ' + t.failure) : null,
    h('p', {}, h('b', {}, 'answer: ')), h('pre', {}, t.answer),
    h('p', {}, 'wall ' + fmt.ms(t.latency_ms) + '; critical path ' + fmt.ms(t.critical_ms) + ' over ' + t.critical_calls + ' calls (marked)'),
    h('h2', {}, 'Per role'),
    h('table', {id: 'roles'},
      h('tr', {}, ['role', 'calls', 'tokens in', 'tokens out', 'dollars', 'latency (summed)', 'errors', 'retries'].map(x => h('th', {}, x))),
      roles.concat(['total']).map(r => {
        const x = r === 'total' ? t.total : t.roles[r];
        return h('tr', {}, h('td', {}, r), h('td', {class: 'num'}, x.calls), h('td', {class: 'num'}, x.usage.prompt_tokens),
          h('td', {class: 'num'}, x.usage.completion_tokens), h('td', {class: 'num'}, fmt.usd(x.cost)),
          h('td', {class: 'num'}, fmt.ms(x.latency_ns / 1e6)), h('td', {class: 'num'}, x.errors || 0), h('td', {class: 'num'}, x.retries || 0));
      })),
    h('h2', {}, 'Calls (click to expand)'),
    h('div', {id: 'tree'}, nodeEl(t.root, true)));
}

// ---- charts ----

// axis returns a scale from [lo, hi] to [a, b].
function scale(lo, hi, a, b) {
  if (!(hi > lo)) hi = lo + (lo === 0 ? 1 : Math.abs(lo));
  return v => a + (v - lo) / (hi - lo) * (b - a);
}

function ticks(lo, hi, n, whole) {
  if (!(hi > lo)) return [lo];
  const step = (hi - lo) / n;
  const out = [];
  for (let i = 0; i <= n; i++) {
    const v = whole ? Math.round(lo + i * step) : lo + i * step;
    if (!out.includes(v)) out.push(v);
  }
  return out;
}

function tickText(v) {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  return v.toPrecision(3);
}

// frame draws axes and returns the chart's scales.
function frame(svg, W, H, xr, yr, xlabel, ylabel) {
  const L = 56, R = 30, T = 12, B = 36;
  const x = scale(xr[0], xr[1], L, W - R), y = scale(yr[0], yr[1], H - B, T);
  for (const v of ticks(yr[0], yr[1], 4)) {
    svg.append(s('line', {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#eee'}));
    svg.append(s('text', {x: L - 4, y: y(v) + 4, 'text-anchor': 'end'}, tickText(v)));
  }
  for (const v of ticks(xr[0], xr[1], 4, xlabel === 'step')) {
    svg.append(s('line', {x1: x(v), x2: x(v), y1: T, y2: H - B, stroke: '#eee'}));
    svg.append(s('text', {x: x(v), y: H - B + 14, 'text-anchor': 'middle'}, tickText(v)));
  }
  svg.append(s('rect', {x: L, y: T, width: W - L - R, height: H - T - B, fill: 'none', stroke: '#999'}));
  svg.append(s('text', {x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle'}, xlabel));
  svg.append(s('text', {x: 12, y: (T + H - B) / 2, transform: 'rotate(-90 12 ' + (T + H - B) / 2 + ')', 'text-anchor': 'middle'}, ylabel));
  return {x, y};
}

// lineChart draws series [{name, color, points: [[x, y]]}].
function lineChart(metric, title, series, xlabel = 'step') {
  const W = 460, H = 240;
  const svg = s('svg', {class: 'chart', viewBox: '0 0 ' + W + ' ' + H, width: '100%', 'data-metric': metric});
  const all = series.flatMap(se => se.points);
  svg.setAttribute('data-points', all.length);
  const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
  const xr = all.length ? [Math.min(...xs), Math.max(...xs)] : [0, 1];
  let yr = all.length ? [Math.min(...ys), Math.max(...ys)] : [0, 1];
  if (yr[0] === yr[1]) yr = [yr[0] - 0.5, yr[1] + 0.5];
  const {x, y} = frame(svg, W, H, xr, yr, xlabel, title);
  for (const se of series) {
    if (!se.points.length) continue;
    const d = se.points.map((p, i) => (i ? 'L' : 'M') + x(p[0]).toFixed(1) + ' ' + y(p[1]).toFixed(1)).join(' ');
    svg.append(s('path', {d, fill: 'none', stroke: se.color, 'stroke-width': 1.5}));
    if (se.points.length <= 200) {
      for (const p of se.points) svg.append(s('circle', {cx: x(p[0]), cy: y(p[1]), r: 2, fill: se.color}));
    }
  }
  return h('div', {class: 'col'}, h('b', {}, title), h('br'), svg);
}

// ---- bench ----

async function pageBench(run) {
  const rep = await api('/api/bench?run=' + run);
  const f = rep.frontier;
  const items = h('div', {id: 'items'}, h('p', {class: 'muted'}, 'Click a point, or an arm in the table, to list its items.'));
  const openArm = arm => loadItems(run, arm, 0, items);
  const table = h('table', {id: 'bench-table'},
    h('tr', {}, ['arm', 'strategy', 'role', 'n', 'accuracy [95% CI]', '$/item', 'cost of pass [95% CI]', 'McNemar p', 'calls', 'p50 / p95 s', 'failures', 'errors'].map(x => h('th', {}, x))),
    rep.rows.map(r => h('tr', {class: r.oracle ? '' : 'click', onclick: r.oracle ? null : () => openArm(r.arm)},
      h('td', {}, r.arm), h('td', {}, r.strategy), h('td', {}, r.role || ''), h('td', {class: 'num'}, r.n),
      h('td', {class: 'num'}, fmt.num(r.accuracy) + ' ' + fmt.ci(r.accuracy_ci)),
      h('td', {class: 'num'}, fmt.usd(r.dollars)),
      h('td', {class: 'num'}, r.none_correct ? 'none correct' : fmt.usd(r.cost_of_pass) + ' ' + fmt.ciUSD(r.cost_of_pass_ci)),
      h('td', {class: 'num'}, r.mcnemar_p === null ? '' : fmt.num(r.mcnemar_p, 4)),
      h('td', {class: 'num'}, fmt.num(r.calls, 2)),
      h('td', {class: 'num'}, fmt.num(r.latency_p50_s, 2) + ' / ' + fmt.num(r.latency_p95_s, 2)),
      h('td', {class: 'num'}, r.failures), h('td', {class: r.errors ? 'num error' : 'num'}, r.errors))));
  show(h('h1', {}, 'Bench: ' + rep.tasks + ' tasks' + (rep.incomplete ? ', ' + rep.incomplete + ' incomplete' : '')),
    progressNote(rep.progress), table, h('h2', {}, 'Accuracy against dollars per item'), frontierChart(f, openArm), items);
}

function frontierChart(f, onArm) {
  const W = 640, H = 340;
  const svg = s('svg', {class: 'chart', id: 'frontier', viewBox: '0 0 ' + W + ' ' + H, width: W, height: H});
  if (!f || !f.arms || !f.arms.length) return h('p', {class: 'muted'}, 'no arm to draw');
  const pts = f.arms.concat(f.oracle ? [f.oracle] : []);
  const maxX = Math.max(...pts.map(p => p.dollars)) * 1.3 || 1e-6;
  const {x, y} = frame(svg, W, H, [0, maxX], [0, 1], 'dollars per item', 'accuracy');
  const line = (ps, attrs) => svg.append(s('path', Object.assign({d: ps.map((p, i) => (i ? 'L' : 'M') + x(p.dollars) + ' ' + y(p.accuracy)).join(' '), fill: 'none'}, attrs)));
  if (f.pareto && f.pareto.length > 1) line(f.pareto, {stroke: '#333', 'stroke-width': 1.5, class: 'pareto'});
  if (f.mix && f.mix.length === 2) line(f.mix, {stroke: '#888', 'stroke-dasharray': '5 3', class: 'mix'});
  f.arms.forEach((p, i) => {
    const role = p.name === f.strong ? ' (strong)' : p.name === f.weak ? ' (weak)' : '';
    const c = s('circle', {class: 'point', cx: x(p.dollars), cy: y(p.accuracy), r: p.pareto ? 7 : 5, fill: COLORS[i % COLORS.length], 'data-arm': p.name, onclick: () => onArm(p.name)},
      s('title', {}, p.name + role + ': accuracy ' + fmt.num(p.accuracy) + ', ' + fmt.usd(p.dollars) + (p.pareto ? ', on the frontier' : '')));
    svg.append(c);
    svg.append(s('text', {x: x(p.dollars) + 9, y: y(p.accuracy) - 6}, p.name + role));
  });
  if (f.oracle) {
    svg.append(s('circle', {class: 'oracle', cx: x(f.oracle.dollars), cy: y(f.oracle.accuracy), r: 7, fill: 'none', stroke: '#444', 'stroke-width': 2},
      s('title', {}, 'oracle ' + f.weak + '/' + f.strong + ': accuracy ' + fmt.num(f.oracle.accuracy) + ', ' + fmt.usd(f.oracle.dollars))));
    svg.append(s('text', {x: x(f.oracle.dollars) + 9, y: y(f.oracle.accuracy) + 14}, 'oracle'));
  }
  const notes = (f.left_out || []).map(w => h('div', {class: 'muted'}, 'not drawn: ' + w));
  return h('div', {}, svg, h('div', {class: 'legend muted'}, 'large points: Pareto frontier (solid line); dashed: random mixing of weak and strong; ring: oracle router'), notes);
}

async function loadItems(run, arm, offset, into) {
  const limit = 50;
  let page;
  try {
    page = await api('/api/bench/items?run=' + run + '&arm=' + encodeURIComponent(arm) + '&offset=' + offset + '&limit=' + limit);
  } catch (e) {
    into.replaceChildren(h('p', {class: 'error'}, 'error: ' + e.message));
    return;
  }
  const pager = h('div', {class: 'pager'},
    offset > 0 ? h('button', {onclick: () => loadItems(run, arm, Math.max(0, offset - limit), into)}, 'previous') : null,
    offset + limit < page.total ? h('button', {onclick: () => loadItems(run, arm, offset + limit, into)}, 'next') : null,
    (offset + 1) + '–' + Math.min(offset + limit, page.total) + ' of ' + page.total);
  into.replaceChildren(h('h2', {}, 'Items of ' + arm), pager,
    h('table', {class: 'items'},
      h('tr', {}, ['task', 'correct', 'extracted', 'reference', '$', 'calls', 'latency', 'failure / error'].map(x => h('th', {}, x))),
      page.items.map(it => h('tr', {class: 'click item', onclick: () => { location.hash = '#/bench/' + run + '/task/' + encodeURIComponent(it.task_id); }},
        h('td', {}, it.task_id), h('td', {class: it.correct ? 'ok' : 'error'}, it.correct ? 'yes' : 'no'),
        h('td', {}, it.extracted), h('td', {}, it.reference || ''), h('td', {class: 'num'}, fmt.usd(it.dollars)),
        h('td', {class: 'num'}, it.calls), h('td', {class: 'num'}, fmt.ms(it.latency_ms)),
        h('td', {class: 'error'}, it.error || it.failure || '')))));
}

async function pageBenchTask(run, task) {
  const it = await api('/api/bench/item?run=' + run + '&task=' + encodeURIComponent(task));
  show(h('h1', {}, 'Item ' + it.task_id), h('p', {}, h('a', {href: '#/bench/' + run}, '← the table')),
    h('div', {class: 'cols'}, it.arms.map(a => h('div', {class: 'col'},
      h('h2', {}, a.arm),
      h('p', {class: a.correct ? 'ok' : 'error'}, a.correct ? 'correct' : 'wrong', a.score !== undefined && a.score !== null ? ' (score ' + a.score + ')' : ''),
      h('div', {}, 'extracted: ', h('b', {}, a.extracted), a.reference ? ' (reference: ' + a.reference + ')' : ''),
      h('div', {}, fmt.usd(a.dollars) + ', ' + a.calls + ' calls, ' + fmt.ms(a.latency_ms)),
      a.failure ? h('div', {class: 'error'}, 'failure: ' + a.failure) : null,
      a.error ? h('div', {class: 'error'}, 'error: ' + a.error) : null,
      h('pre', {}, a.answer || ''),
      a.has_trace ? h('a', {href: '#/trace/' + run + '/' + a.rec}, 'trace') : h('span', {class: 'muted'}, 'no trace kept')))));
}

// ---- rollouts ----

async function pageRollouts(run, offset) {
  const sum = await api('/api/rollouts?run=' + run);
  const limit = 100;
  const page = await api('/api/rollouts/list?run=' + run + '&offset=' + offset + '&limit=' + limit);
  const stats = [sum.all].concat(sum.strategies);
  const W = 460, H = 200;
  const hist = s('svg', {class: 'chart', width: W, height: H});
  const maxC = Math.max(1, ...sum.histogram);
  const {x, y} = frame(hist, W, H, [sum.min, sum.max], [0, maxC], 'reward', 'rollouts');
  const bw = (sum.max - sum.min) / sum.histogram.length;
  sum.histogram.forEach((c, i) => {
    const x0 = x(sum.min + i * bw), x1 = bw > 0 ? x(sum.min + (i + 1) * bw) : x0 + 8;
    hist.append(s('rect', {x: x0, y: y(c), width: Math.max(1, x1 - x0 - 1), height: y(0) - y(c), fill: '#1f77b4'}));
  });
  const go = o => { location.hash = '#/rollouts/' + run + '?offset=' + o; };
  show(h('h1', {}, 'Rollouts: ' + sum.all.n + ', ' + sum.groups + ' groups'), progressNote(sum.progress),
    h('table', {},
      h('tr', {}, ['strategy', 'rollouts', 'failed', 'mean reward', 'mean score', 'mean $', 'calls', 'latency'].map(x => h('th', {}, x))),
      stats.map(st => h('tr', {}, h('td', {}, st.strategy), h('td', {class: 'num'}, st.n), h('td', {class: 'num'}, st.failed),
        h('td', {class: 'num'}, fmt.num(st.reward)), h('td', {class: 'num'}, fmt.num(st.score)), h('td', {class: 'num'}, fmt.usd(st.cost)),
        h('td', {class: 'num'}, fmt.num(st.calls, 2)), h('td', {class: 'num'}, fmt.ms(st.latency_ms))))),
    Object.keys(sum.dropped).length ? h('p', {}, 'groups not trained on: ' + Object.entries(sum.dropped).map(([k, v]) => k + ' ' + v).join(', ')) : null,
    h('h2', {}, 'Rewards of scored rollouts'), hist,
    h('h2', {}, 'Rollouts'),
    h('div', {class: 'pager'},
      offset > 0 ? h('button', {onclick: () => go(Math.max(0, offset - limit))}, 'previous') : null,
      offset + limit < page.total ? h('button', {onclick: () => go(offset + limit)}, 'next') : null,
      (offset + 1) + '–' + Math.min(offset + limit, page.total) + ' of ' + page.total),
    h('table', {id: 'rollouts'},
      h('tr', {}, ['id', 'strategy', 'reward', 'score', '$', 'calls', 'latency'].map(x => h('th', {}, x))),
      page.items.map(it => h('tr', {class: 'click' + (it.failed ? ' failed' : ''), onclick: () => { location.hash = '#/rollouts/' + run + '/' + it.rec; }},
        h('td', {}, it.id), h('td', {}, it.strategy), h('td', {class: 'num'}, it.failed ? 'failed' : fmt.num(it.reward)),
        h('td', {class: 'num'}, fmt.num(it.score)), h('td', {class: 'num'}, fmt.usd(it.cost)), h('td', {class: 'num'}, it.calls),
        h('td', {class: 'num'}, fmt.ms(it.latency_ms))))));
}

async function pageRollout(run, rec) {
  const it = await api('/api/rollouts/item?run=' + run + '&rec=' + rec);
  const a = it.rollout;
  show(h('h1', {}, 'Rollout ' + a.id), h('p', {}, h('a', {href: '#/rollouts/' + run}, '← all rollouts')),
    h('p', {}, 'status ', h('b', {class: a.status === 'scored' ? 'ok' : 'error'}, a.status), ', reward ' + fmt.num(a.reward) + ', ' + fmt.usd(a.total.cost)),
    a.error ? h('p', {class: 'error'}, 'error: ' + a.error) : null,
    a.failure ? h('p', {class: 'error'}, 'failure: ' + a.failure) : null,
    h('p', {}, it.traces.length ? it.traces.map(w => h('a', {href: '#/trace/' + run + '/' + rec + '/' + w, style: 'margin-right:12px'}, w + ' trace')) : h('span', {class: 'muted'}, 'no trace kept')),
    h('div', {class: 'cols'},
      h('div', {class: 'col'}, h('h2', {}, 'prompt'), h('pre', {}, a.prompt), a.reference_answer ? h('div', {}, 'reference: ' + a.reference_answer) : null),
      h('div', {class: 'col'}, h('h2', {}, a.strategy), h('pre', {}, a.final_output)),
      h('div', {class: 'col'}, h('h2', {}, 'baseline ' + a.baseline_strategy), h('pre', {}, a.baseline_output))),
    h('h2', {}, 'record'), h('pre', {}, JSON.stringify(a, null, 2)));
}

// ---- training ----

const METRICS = [
  ['reward', 'reward', p => p.reward],
  ['accuracy', 'accuracy', p => p.accuracy],
  ['cost', 'dollars per rollout', p => p.cost],
  ['delegation_rate', 'delegation rate', p => p.delegation_rate],
  ['staleness', 'staleness (policy versions behind)', p => p.staleness],
];

// kindMetrics are the charts of the delegation rate of each kind of step
// the series report.
function kindMetrics(series) {
  const kinds = new Set();
  for (const se of series) for (const p of se.points) for (const k of Object.keys(p.delegated || {})) kinds.add(k);
  return [...kinds].sort().map(k => ['delegated_' + k, 'delegation rate of ' + k + ' steps', p => (p.delegated || {})[k]]);
}

async function pageTrain(selected) {
  const {runs} = await api('/api/runs');
  const trains = runs.filter(r => r.kind === 'train');
  const chosen = selected.length ? selected : trains.map(r => r.id);
  const {series} = chosen.length ? await api('/api/train?runs=' + chosen.join(',')) : {series: []};
  const color = {};
  chosen.forEach((id, i) => { color[id] = COLORS[i % COLORS.length]; });
  const charts = h('div', {class: 'cols', id: 'charts'});
  const legend = h('div', {class: 'legend'});
  const draw = () => {
    legend.replaceChildren(...series.map(se => h('span', {}, h('span', {class: 'swatch', style: 'background:' + color[se.run]}), se.name + ' (' + se.points.length + ' steps)')));
    charts.replaceChildren(...METRICS.concat(kindMetrics(series)).map(([key, title, get]) => lineChart(key, title,
    series.map(se => ({name: se.name, color: color[se.run], points: se.points.filter(p => get(p) !== null && get(p) !== undefined).map(p => [p.step, get(p)])})))));
  };
  draw();
  const boxes = trains.map(r => h('label', {style: 'margin-right:12px'},
    h('input', {type: 'checkbox', checked: chosen.includes(r.id), 'data-run': r.id, onchange: () => {
      const ids = [...document.querySelectorAll('input[data-run]')].filter(b => b.checked).map(b => b.getAttribute('data-run'));
      location.hash = '#/train/' + ids.join(',');
    }}), ' ', r.name));
  show(h('h1', {}, 'Training'),
    trains.length ? h('div', {}, boxes) : h('p', {class: 'muted'}, 'no training run given'),
    legend,
    h('p', {class: 'muted', id: 'live'}, 'live: new steps appear as the metrics files grow'),
    charts);
  for (const se of series) {
    const es = new EventSource('/api/train/events?run=' + se.run + '&after=' + se.points.length);
    es.onmessage = ev => {
      const msg = JSON.parse(ev.data);
      se.points.push(...msg.points);
      draw();
    };
    es.addEventListener('failure', ev => {
      document.getElementById('live').textContent = 'live: ' + JSON.parse(ev.data);
    });
    streams.push(es);
  }
}

// ---- gateway ----

function rolesText(roles) {
  return roles.map(r => r.role + ': ' + r.calls + ' calls, ' + r.prompt_tokens + '→' + r.completion_tokens + ' tok, ' + fmt.usd(r.dollars)).join('; ');
}

async function pageGateway(run, offset) {
  const limit = 100;
  const g = await api('/api/gateway?run=' + run + '&offset=' + offset + '&limit=' + limit);
  const page = g.sessions;
  const go = o => { location.hash = '#/gateway/' + run + '?offset=' + o; };
  show(h('h1', {}, 'Gateway sessions'),
    progressNote(g.progress),
    h('p', {}, Object.entries(g.statuses).sort().map(([k, v]) => k + ' ' + v).join(', ') || 'no session', '; ' + g.groups + ' group records written'),
    h('p', {class: 'muted'}, 'Sessions are keyed by the digest of their id: the id is a credential the gateway never stores.'),
    h('div', {class: 'pager'},
      offset > 0 ? h('button', {onclick: () => go(Math.max(0, offset - limit))}, 'previous') : null,
      offset + limit < page.total ? h('button', {onclick: () => go(offset + limit)}, 'next') : null,
      page.total ? (offset + 1) + '–' + Math.min(offset + limit, page.total) + ' of ' + page.total : ''),
    h('table', {id: 'sessions'},
      h('tr', {}, ['key (digest)', 'status', 'group', 'task', 'created', 'reward', 'calls', 'tokens', '$', 'per role'].map(x => h('th', {}, x))),
      page.items.map(it => h('tr', {class: 'click' + (it.status === 'finished' ? '' : ' muted'), 'data-key': it.key, onclick: () => { location.hash = '#/gateway/' + run + '/' + it.key; }},
        h('td', {}, h('code', {title: it.key}, it.key.slice(0, 16) + '…')), h('td', {}, it.status + (it.grouped ? ' (grouped)' : '')),
        h('td', {}, it.group), h('td', {}, it.task || ''), h('td', {}, it.created),
        h('td', {class: 'num'}, it.reward === null ? '' : fmt.num(it.reward) + (it.correct === true ? ' ✓' : it.correct === false ? ' ✗' : '')),
        h('td', {class: 'num'}, it.calls), h('td', {class: 'num'}, it.tokens), h('td', {class: 'num'}, fmt.usd(it.dollars)),
        h('td', {class: 'small'}, rolesText(it.roles))))));
}

function lpText(lp) {
  if (!lp) return 'no logprobs';
  return 'logprobs: ' + lp.tokens + ' tokens, mean ' + fmt.num(lp.mean) + ', min ' + fmt.num(lp.min) + ', perplexity ' + fmt.num(lp.perplexity);
}

function sessionCallEl(c, open) {
  const head = h('div', {class: 'head'},
    h('span', {class: 'toggle'}, '▸ '),
    h('b', {}, 'call ' + c.index), ' ', h('span', {class: 'tag'}, c.role), h('span', {class: 'tag'}, c.model),
    c.trained ? h('span', {class: 'tag'}, 'trained') : null,
    c.failed ? h('span', {class: 'tag failed'}, 'failed ' + c.status) : null,
    c.prompt_tokens + '→' + c.completion_tokens + ' tok, ' + fmt.usd(c.dollars) + ', ' + fmt.ms(c.latency_ms) + '; ' + lpText(c.logprobs));
  const body = h('div', {class: 'body'},
    c.failed ? h('p', {class: 'error'}, 'failed (' + c.status + '): ' + c.error) : null,
    h('p', {class: 'muted'}, 'token ids recorded: ' + c.prompt_ids + ' prompt, ' + c.completion_ids + ' completion' + (c.no_tokens ? ' (' + c.no_tokens + ')' : '')),
    c.messages.map(messageEl),
    h('div', {}, h('span', {class: 'muted'}, 'output' + (c.finish_reason ? ' (' + c.finish_reason + ')' : '')), messageEl(c.output)),
    c.children.map(k => sessionCallEl(k, false)));
  const el = h('div', {class: 'node call' + (open ? ' open' : ''), 'data-index': c.index}, head, body);
  head.addEventListener('click', () => el.classList.toggle('open'));
  return el;
}

async function pageSession(run, key) {
  const v = await api('/api/gateway/session?run=' + run + '&key=' + encodeURIComponent(key));
  show(h('h1', {}, 'Session ', h('code', {}, v.key.slice(0, 16) + '…')),
    h('p', {}, h('a', {href: '#/gateway/' + run}, '← all sessions')),
    h('p', {}, 'status ', h('b', {}, v.status), ', group ' + v.group + (v.task ? ', task ' + v.task : '') +
      (v.reward === null ? '' : ', reward ' + fmt.num(v.reward)) + ', ' + v.calls + ' calls' + (v.failed ? ' (' + v.failed + ' failed)' : '') +
      (v.refused ? ', ' + v.refused + ' refused at a bound' : '') + ', ' + v.tokens + ' tokens, ' + fmt.usd(v.dollars) + ', ' + v.samples + ' samples'),
    h('p', {class: 'small'}, h('code', {}, v.key)),
    v.prompt ? h('div', {}, h('b', {}, 'prompt: '), h('pre', {}, v.prompt)) : null,
    v.roles.length ? h('p', {}, rolesText(v.roles)) : null,
    h('h2', {}, 'Calls (click to expand; a call that continues another is its child)'),
    v.tree.length ? h('div', {id: 'tree'}, v.tree.map((c, i) => sessionCallEl(c, i === 0))) : h('p', {class: 'muted'}, 'no call recorded: the session is not finished'));
}

// ---- live servers ----

const LIVE = [
  ['queue', 'queue depth', p => p.queue],
  ['sessions', 'sessions', p => p.sessions],
  ['throughput', 'throughput (per s)', p => p.throughput],
];

async function pageLive() {
  const {servers} = await api('/api/live');
  if (!servers.length) {
    show(h('h1', {}, 'Live servers'), h('p', {class: 'muted'}, 'no server given: start the view with --server NAME=URL'));
    return;
  }
  const t0 = Date.now() / 1000;
  const sec = p => Date.parse(p.time) / 1000 - t0;
  const charts = h('div', {class: 'cols', id: 'live-charts'});
  const table = h('table', {id: 'live-servers'});
  const draw = () => {
    table.replaceChildren(h('tr', {}, ['server', 'up', 'health', 'metrics', 'throughput counts', 'error'].map(x => h('th', {}, x))),
      ...servers.map((sv, i) => h('tr', {},
        h('td', {}, h('span', {class: 'swatch', style: 'background:' + COLORS[i % COLORS.length]}), sv.name + ' ', h('span', {class: 'muted'}, sv.url)),
        h('td', {class: sv.up ? 'ok' : 'error'}, sv.up ? 'up' : 'down'),
        h('td', {}, sv.health_path + ' ' + (sv.health_status || '')), h('td', {}, '/metrics ' + (sv.metrics_status || '') + ' (' + sv.metrics.length + ' families)'),
        h('td', {}, sv.throughput || ''), h('td', {class: 'error'}, sv.error || ''))));
    charts.replaceChildren(...LIVE.map(([key, title, get]) => lineChart(key, title,
      servers.map((sv, i) => ({name: sv.name, color: COLORS[i % COLORS.length],
        points: sv.points.filter(p => get(p) !== null && get(p) !== undefined).map(p => [sec(p), get(p)])})), 'seconds')));
  };
  draw();
  show(h('h1', {}, 'Live servers'), table,
    h('p', {class: 'muted', id: 'live'}, 'live: each poll adds a point'), charts,
    h('h2', {}, 'Metrics (series summed; histograms by count)'),
    h('div', {class: 'cols'}, servers.map(sv => h('div', {class: 'col'}, h('b', {}, sv.name),
      h('table', {class: 'small'}, sv.metrics.filter(m => !m.name.startsWith('go_') && !m.name.startsWith('process_')).map(m =>
        h('tr', {}, h('td', {}, m.name), h('td', {class: 'num'}, tickText(m.value)))))))));
  const last = Math.max(0, ...servers.flatMap(sv => sv.points.map(p => p.seq)));
  const es = new EventSource('/api/live/events?after=' + last);
  // Points may come many a second: redraw at most twice a second.
  let pending = null;
  es.onmessage = ev => {
    for (const p of JSON.parse(ev.data).points) {
      const sv = servers[p.server];
      sv.points.push(p);
      if (sv.points.length > 3600) sv.points.shift();
      sv.up = p.up;
    }
    if (pending === null) pending = setTimeout(() => { pending = null; draw(); }, 500);
  };
  streams.push(es);
}

// ---- router ----

async function route() {
  clearTimeout(refreshTimer);
  for (const es of streams) es.close();
  streams = [];
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  try {
    switch (parts[0]) {
      case undefined: return await pageRuns();
      case 'trace': return await pageTrace(parts[1], parts[2], parts[3]);
      case 'bench':
        if (parts[2] === 'task') return await pageBenchTask(parts[1], parts[3]);
        return await pageBench(parts[1]);
      case 'rollouts':
        if (parts[2] !== undefined) return await pageRollout(parts[1], parts[2]);
        return await pageRollouts(parts[1], Number(params.get('offset') || 0));
      case 'train': return await pageTrain(parts[1] ? parts[1].split(',').filter(Boolean).map(Number) : []);
      case 'gateway':
        if (parts[2] !== undefined) return await pageSession(parts[1], parts[2]);
        return await pageGateway(parts[1], Number(params.get('offset') || 0));
      case 'live': return await pageLive();
      default: show(h('p', {class: 'error'}, 'no page ' + location.hash));
    }
  } catch (e) {
    fail(e);
  }
}

window.addEventListener('hashchange', route);
route();
