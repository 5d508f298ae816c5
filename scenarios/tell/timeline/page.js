'use strict';
// Draws the runs of the page's data on one time axis. Everything drawn comes from the
// data fencesim wrote into the page; nothing is fetched.

const SVG = 'http://www.w3.org/2000/svg';
const LABEL = 190;
const AXIS = 26;
const LANE = 58;
const GATEWAY = 24;
const FAULTS = 20;
const CHECKS = 24;
const ROW = 16;
const ROWS_SHOWN = 8;
const COLORS = ['#0969da', '#bf3989', '#1a7f37', '#9a6700', '#8250df', '#bc4c00'];

const view = { scale: 0, runs: [], focused: 0, selected: null };

async function load() {
  const text = document.getElementById('data').textContent.trim();
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text());
}

function el(tag, attrs, parent, text) {
  const node = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function clock(ms) {
  const pad = (n, w) => String(n).padStart(w, '0');
  const h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60, s = Math.floor(ms / 1000) % 60;
  return `${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}.${pad(ms % 1000, 3)}`;
}

function span() {
  return Math.max(1, ...view.runs.map((v) => v.run.end)) * 1.01;
}

function fit() {
  const width = Math.max(600, document.documentElement.clientWidth - 40) - LABEL - 20;
  view.scale = width / span();
}

function x(t) {
  return LABEL + t * view.scale;
}

function axis(svg, height) {
  const group = el('svg:g', { class: 'axis' }, svg);
  const steps = [1, 2, 5].flatMap((f) => [1, 10, 100, 1000, 10000, 100000, 1000000].map((p) => f * p));
  const step = steps.sort((a, b) => a - b).find((s) => s * view.scale >= 90) || 3600000;
  const base = view.runs[0].run.base;
  for (let t = 0; t <= span(); t += step) {
    el('svg:line', { x1: x(t), x2: x(t), y1: AXIS - 6, y2: height }, group);
    el('svg:text', { x: x(t) + 2, y: AXIS - 10 }, group, clock(base + t).replace(/\.000$/, ''));
  }
}

function lane(svg, y, text) {
  el('svg:text', { x: 6, y: y, class: 'lane-label' }, svg, text);
}

function titled(node, text) {
  el('svg:title', {}, node, text);
  return node;
}

function rect(svg, from, to, y, h, attrs) {
  const width = Math.max(2, x(to) - x(from));
  return el('svg:rect', Object.assign({ x: x(from), y: y, width: width, height: h }, attrs), svg);
}

function label(svg, from, to, y, text) {
  if (x(to) - x(from) > text.length * 6) el('svg:text', { x: x(from) + 4, y: y }, svg, text);
}

function markAt(svg, v, index, at, y, cls, event, text, shape) {
  const attrs = { class: `mark ${cls}`, 'data-run': index, 'data-event': event };
  let node;
  if (shape === 'triangle') {
    const cx = x(at);
    node = el('svg:path', Object.assign({ d: `M${cx},${y - 6} L${cx + 5},${y + 4} L${cx - 5},${y + 4} Z` }, attrs), svg);
  } else {
    const r = cls === 'rejected' || cls === 'paid-again' ? 5.5 : 3.5;
    node = el('svg:circle', Object.assign({ cx: x(at), cy: y, r: r }, attrs), svg);
  }
  titled(node, `${clock(v.run.base + at)}  ${text}`);
  node.addEventListener('click', () => select(index, event));
  v.visible.push(event);
  return node;
}

function workerLanes(svg, v, index, top) {
  const run = v.run;
  run.workers.forEach((name, w) => {
    const y = top + w * LANE;
    lane(svg, y + 14, `${name} believes`);
    lane(svg, y + 30, `${name} in Redis`);
    lane(svg, y + 47, `${name} writes`);
    el('svg:line', { x1: 0, x2: x(span()), y1: y + LANE - 2, y2: y + LANE - 2, stroke: '#eaeef2' }, svg);
  });
  for (const band of run.bands) {
    const y = top + band.worker * LANE;
    const node = rect(svg, band.from, band.to, y, LANE - 4, { class: 'band mark', 'data-run': index, 'data-event': band.event });
    titled(node, band.label).parentNode.addEventListener('click', () => select(index, band.event));
    label(svg, band.from, band.to, y + LANE - 8, band.label);
  }
  for (const bar of run.believed) {
    const y = top + bar.worker * LANE + 3;
    titled(rect(svg, bar.from, bar.to, y, 14, { class: 'believed', stroke: COLORS[bar.worker % COLORS.length] }), bar.label);
    label(svg, bar.from, bar.to, y + 11, bar.label);
  }
  for (const bar of run.leases) {
    const y = top + bar.worker * LANE + 19;
    titled(rect(svg, bar.from, bar.to, y, 14, { class: 'lease', fill: COLORS[bar.worker % COLORS.length] }), bar.label);
    label(svg, bar.from, bar.to, y + 11, bar.label);
  }
}

function folds(svg, v, index, top) {
  v.run.folds.forEach((fold, f) => {
    const y = top + fold.worker * LANE + 37;
    const open = v.open.has(f);
    const node = rect(svg, fold.from, fold.to, y, 14, { class: open ? 'fold open' : 'fold', 'data-fold': f });
    titled(node, `${fold.label} (click to ${open ? 'fold' : 'open'})`);
    node.addEventListener('click', () => {
      if (open) v.open.delete(f);
      else v.open.add(f);
      draw(index);
    });
    if (!open) label(svg, fold.from, fold.to, y + 11, fold.label);
  });
}

function marks(svg, v, index, top, gateway, faults) {
  for (const mark of v.run.marks) {
    if (mark.fold !== null && !v.open.has(mark.fold)) continue;
    const y = mark.lane === 'write' ? top + mark.worker * LANE + 44 : mark.lane === 'money' ? gateway : faults;
    markAt(svg, v, index, mark.at, y, mark.kind, mark.event, mark.label, mark.lane === 'fault' ? 'triangle' : 'circle');
  }
}

function checks(svg, v, index, y) {
  for (const breach of v.run.breaches) {
    const cls = breach.diagnostic ? 'diagnostic' : 'breach';
    const what = breach.diagnostic ? `${breach.invariant} (diagnostic)` : breach.invariant;
    markAt(svg, v, index, breach.at, y, cls, breach.event, `${what}: ${breach.detail}`, 'triangle');
  }
}

function rows(svg, v, index, top) {
  const shown = v.allRows ? v.run.rows : v.run.rows.slice(0, ROWS_SHOWN);
  shown.forEach((row, i) => {
    const y = top + i * ROW;
    lane(svg, y + 11, `row ${row.refund}`);
    let from = 0, state = 'pending', fence = null, event = null;
    const segments = [];
    for (const [at, next, nextFence, nextEvent] of row.changes) {
      segments.push([from, at, state, fence, event]);
      [from, state, fence, event] = [at, next, nextFence, nextEvent];
    }
    segments.push([from, v.run.end, state, fence, event]);
    for (const [start, end, what, f, e] of segments) {
      const text = f === null ? what : `${what}, fence ${f}`;
      const node = titled(rect(svg, start, end, y + 2, ROW - 4, { class: `state-${what}` }), `${row.refund}: ${text}`);
      if (e !== null) node.addEventListener('click', () => select(index, e));
      label(svg, start, end, y + 11, text);
    }
  });
  return shown.length;
}

function draw(index) {
  const v = view.runs[index];
  const run = v.run;
  const workers = run.workers.length * LANE;
  const gateway = AXIS + workers + GATEWAY / 2;
  const faults = AXIS + workers + GATEWAY + FAULTS / 2;
  const checksY = AXIS + workers + GATEWAY + FAULTS + CHECKS / 2;
  const rowsTop = AXIS + workers + GATEWAY + FAULTS + CHECKS;
  const shown = v.allRows ? run.rows.length : Math.min(ROWS_SHOWN, run.rows.length);
  const height = rowsTop + shown * ROW + 6;
  const svg = el('svg:svg', { width: x(span()) + 20, height: height, class: 'timeline', 'data-run': index });
  axis(svg, height);
  lane(svg, gateway + 4, 'gateway');
  lane(svg, faults + 4, 'faults');
  lane(svg, checksY + 4, 'checks');
  v.visible = [];
  workerLanes(svg, v, index, AXIS);
  folds(svg, v, index, AXIS);
  marks(svg, v, index, AXIS, gateway, faults);
  checks(svg, v, index, checksY);
  rows(svg, v, index, rowsTop);
  v.visible = [...new Set(v.visible)].sort((a, b) => a - b);
  v.scroll.replaceChildren(svg);
  v.more.hidden = run.rows.length <= ROWS_SHOWN;
  v.more.textContent = v.allRows ? 'show the first rows only' : `show all ${run.rows.length} rows that were not routine`;
  if (view.selected && view.selected.run === index) highlight(index, view.selected.event);
}

function broke(v, index, parent) {
  const firsts = new Map();
  for (const breach of v.run.breaches) {
    const seen = firsts.get(breach.invariant);
    if (seen) seen.count += 1;
    else firsts.set(breach.invariant, { breach: breach, count: 1 });
  }
  if (!firsts.size) return;
  const list = el('ul', { class: 'broke' }, parent);
  for (const [name, { breach, count }] of firsts) {
    const kind = breach.diagnostic ? ' (a diagnostic: shown, does not fail a run)' : '';
    const item = el('li', { class: breach.diagnostic ? 'diagnostic' : 'invariant' }, list,
      `${name}${kind}: ${count} time(s), first at ${clock(v.run.base + breach.at)}: ${breach.detail}`);
    item.addEventListener('click', () => select(index, breach.event, breach.line));
  }
}

function section(v, index, parent) {
  const run = v.run;
  const box = el('section', { class: 'run', id: `run-${index}` }, parent);
  el('h2', {}, box, run.title);
  const broken = [...new Set(run.breaches.filter((b) => !b.diagnostic).map((b) => b.invariant))];
  const p = el('p', {}, box, `mechanism ${run.mechanism}, ${run.gateway} gateway, seed ${run.seed}, trace ${run.trace_hash}: `);
  el('span', { class: run.passed ? 'verdict passed' : 'verdict failed' }, p,
    run.passed ? 'every invariant held' : `broke ${broken.join(', ')}`);
  const again = el('p', {}, box, 'Run it again: ');
  el('span', { class: 'replay' }, again, run.replay);
  broke(v, index, box);
  v.scroll = el('div', { class: 'scroll' }, box);
  v.more = el('button', { class: 'more-rows' }, box);
  v.more.addEventListener('click', () => { v.allRows = !v.allRows; draw(index); });
  const panels = el('div', { class: 'panels' }, box);
  v.story = el('div', { class: 'story', tabindex: 0 }, panels);
  const breached = new Set(run.breaches.map((b) => b.line));
  run.story.forEach((line, i) => {
    const row = el('div', { class: breached.has(i) ? 'breached' : '', 'data-line': i }, v.story,
      `${clock(run.base + line.at)}  ${line.actor.padEnd(8)} ${line.text}`);
    row.addEventListener('click', () => select(index, line.event, i));
  });
  v.event = el('pre', { class: 'event' }, panels, 'Select a mark, a band or a line of the story to see its event.');
}

function lineOf(run, event) {
  let found = 0;
  run.story.forEach((line, i) => { if (line.event <= event) found = i; });
  return found;
}

function highlight(index, event, line) {
  const v = view.runs[index];
  for (const node of document.querySelectorAll('.mark.selected')) node.classList.remove('selected');
  const nodes = v.scroll.querySelectorAll(`.mark[data-event="${event}"]`);
  nodes.forEach((node) => node.classList.add('selected'));
  const story = v.story.querySelectorAll('div');
  for (const node of v.story.querySelectorAll('div.selected')) node.classList.remove('selected');
  const chosen = story[line === undefined ? lineOf(v.run, event) : line];
  if (chosen) {
    chosen.classList.add('selected');
    v.story.scrollTop = chosen.offsetTop - v.story.offsetTop - v.story.clientHeight / 2;
  }
  if (nodes.length) {
    const at = Number(nodes[0].getAttribute('cx') || nodes[0].getAttribute('x') || 0);
    if (at < v.scroll.scrollLeft + LABEL || at > v.scroll.scrollLeft + v.scroll.clientWidth - 20) {
      v.scroll.scrollLeft = at - v.scroll.clientWidth / 2;
    }
  }
}

function select(index, event, line) {
  const v = view.runs[index];
  view.focused = index;
  view.selected = { run: index, event: event };
  const raw = v.run.events[event];
  v.event.textContent = raw ? JSON.stringify(JSON.parse(raw), null, 2) : `no event ${event}`;
  highlight(index, event, line);
}

function step(direction) {
  const v = view.runs[view.focused];
  if (!v || !v.visible.length) return;
  const now = view.selected && view.selected.run === view.focused ? view.selected.event : null;
  let next;
  if (now === null) next = direction > 0 ? v.visible[0] : v.visible[v.visible.length - 1];
  else if (direction > 0) next = v.visible.find((e) => e > now);
  else next = [...v.visible].reverse().find((e) => e < now);
  if (next !== undefined) select(view.focused, next);
}

function zoom(factor) {
  if (factor === 0) fit();
  else view.scale *= factor;
  view.runs.forEach((_, i) => draw(i));
}

function keys(event) {
  if (event.key === 'ArrowRight') step(1);
  else if (event.key === 'ArrowLeft') step(-1);
  else if (event.key === '+' || event.key === '=') zoom(2);
  else if (event.key === '-') zoom(0.5);
  else if (event.key === '0') zoom(0);
  else return;
  event.preventDefault();
}

function linked() {
  const found = /run=(\d+)&event=(\d+)/.exec(location.hash);
  if (found && view.runs[Number(found[1])]) select(Number(found[1]), Number(found[2]));
}

async function main() {
  const data = await load();
  const root = document.getElementById('runs');
  root.replaceChildren();
  view.runs = data.runs.map((run) => ({ run: run, open: new Set(), allRows: false, visible: [] }));
  fit();
  view.runs.forEach((v, i) => section(v, i, root));
  view.runs.forEach((_, i) => draw(i));
  document.addEventListener('keydown', keys);
  document.getElementById('zoom-in').addEventListener('click', () => zoom(2));
  document.getElementById('zoom-out').addEventListener('click', () => zoom(0.5));
  document.getElementById('zoom-fit').addEventListener('click', () => zoom(0));
  linked();
  document.body.dataset.renderMs = String(Math.round(performance.now()));
  document.body.dataset.rendered = 'yes';
}

main().catch((error) => {
  document.getElementById('runs').textContent = `The timeline could not be drawn: ${error}`;
  throw error;
});
