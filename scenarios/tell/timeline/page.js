'use strict';
// Draws the runs of the page's data on one time axis. Everything drawn comes from the
// data fencesim wrote into the page; nothing is fetched. This file holds the state, the
// selection, the keys and the zoom; lanes.js draws a run's timeline, marks.js its marks,
// detail.js the panels beside it, words.js the legend and the glossary.

const SVG = 'http://www.w3.org/2000/svg';
const LABEL = 150;
const PAD = 12;
const AXIS = 24;
const ROW = 16;
const ROWS_SHOWN = 8;
const MAX_SCALE = 20;
const COLORS = ['#0969da', '#bf3989', '#1a7f37', '#9a6700', '#8250df', '#bc4c00'];

const view = { scale: 0, runs: [], selected: null, focus: null };

async function load() {
  const text = document.getElementById('data').textContent.trim();
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  const data = JSON.parse(await new Response(stream).text());
  // the lists the runs share are kept once: a run's list is [start, count] ranges of them
  for (const [key, table] of Object.entries(data.shared || {})) {
    for (const run of data.runs) run[key] = run[key].flatMap(([start, count]) => table.slice(start, start + count));
  }
  return data;
}

function el(tag, attrs, parent, text) {
  const node = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) if (value !== undefined) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function clock(ms) {
  const pad = (n, w) => String(n).padStart(w, '0');
  const h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60, s = Math.floor(ms / 1000) % 60;
  return `${pad(h, 2)}:${pad(m, 2)}:${pad(s, 2)}.${pad(ms % 1000, 3)}`;
}

// "10:00:34.000" as milliseconds since midnight, or null.
function parseClock(text) {
  const found = /(\d+):(\d+):(\d+)\.(\d+)/.exec(text || '');
  if (!found) return null;
  return ((Number(found[1]) * 60 + Number(found[2])) * 60 + Number(found[3])) * 1000 + Number(found[4]);
}

// The parsed JSON of event `index` of run `v`, kept once parsed.
function eventOf(v, index) {
  if (!v.parsed) v.parsed = new Map();
  if (!v.parsed.has(index)) {
    const raw = v.run.events[index];
    v.parsed.set(index, raw ? JSON.parse(raw) : null);
  }
  return v.parsed.get(index);
}

// When event `index` happened, in milliseconds since the run's zero.
function timeOf(v, index) {
  const event = eventOf(v, index);
  const at = event ? parseClock(event.at) : null;
  return at === null ? 0 : at - v.run.base;
}

// The time the axis covers: the runs' end and a margin after it, so that what happened
// last (often the breach) is not squeezed against the right edge.
function span() {
  return Math.max(1, ...view.runs.map((v) => v.run.end)) * 1.06;
}

function fit() {
  const width = Math.max(320, document.documentElement.clientWidth - 32 - LABEL - 4) - 2 * PAD;
  view.scale = width / span();
  view.fitted = view.scale;
}

function x(t) {
  return PAD + t * view.scale;
}

// The story line of event `event`: its own, or else the last told before it.
function lineOf(run, event) {
  let before = 0;
  for (let i = 0; i < run.story.length; i += 1) {
    if (run.story[i].event === event) return i;
    if (run.story[i].event < event) before = i;
  }
  return before;
}

function select(index, event, line) {
  const v = view.runs[index];
  if (!v) return;
  const chosen = line === undefined ? lineOf(v.run, event) : line;
  // when it happened: its own moment, or (for an event the page does not keep) its line's
  const told = v.run.story[chosen];
  const t = eventOf(v, event) ? timeOf(v, event) : told ? told.at : 0;
  view.selected = { run: index, event: event, line: chosen, t: t };
  view.focus = null;
  for (const other of view.runs) if (other !== v) clearSelection(other);
  highlight(index);
  showEvent(v, index, event, view.selected.line);
}

function clearSelection(v) {
  for (const node of v.box.querySelectorAll('.selected')) node.classList.remove('selected');
}

function highlight(index) {
  const v = view.runs[index];
  const { event, line } = view.selected;
  clearSelection(v);
  const nodes = [...v.scroll.querySelectorAll(`.mark[data-event="${event}"]`)];
  for (const cluster of v.scroll.querySelectorAll('.cluster')) {
    if (cluster.events.includes(event)) nodes.push(cluster);
  }
  nodes.forEach((node) => node.classList.add('selected'));
  const chosen = v.story.children[line];
  if (chosen) {
    chosen.classList.add('selected');
    const top = chosen.offsetTop - v.story.offsetTop;
    if (top < v.story.scrollTop || top > v.story.scrollTop + v.story.clientHeight - chosen.offsetHeight) {
      v.story.scrollTop = top - v.story.clientHeight / 2;
    }
  }
  // the selected event's moment in view: where its mark is, and where its bars begin
  const at = x(view.selected.t);
  if (at < v.scroll.scrollLeft + 10 || at > v.scroll.scrollLeft + v.scroll.clientWidth - 10) {
    v.scroll.scrollLeft = at - v.scroll.clientWidth / 2;
  }
}

// Every event a key steps to: each run's drawn marks in order, run after run.
function steps() {
  const all = [];
  view.runs.forEach((v, run) => v.visible.forEach((event) => all.push({ run, event })));
  return all;
}

// How much of run `index`'s section the window shows, in pixels of height.
function shown(index) {
  const box = view.runs[index].box.getBoundingClientRect();
  return Math.max(0, Math.min(box.bottom, window.innerHeight) - Math.max(box.top, 0));
}

function step(direction) {
  const all = steps();
  if (!all.length) return;
  let now = view.selected;
  // a selection in a run scrolled out of the window: the keys act on the run in view
  if (now && !shown(now.run)) {
    const inView = view.runs.map((_, i) => i).sort((a, b) => shown(b) - shown(a))[0];
    if (shown(inView) > 0 && inView !== now.run) now = null;
    if (now === null) {
      const first = all.filter((s) => s.run === inView);
      const pick = direction > 0 ? first[0] : first[first.length - 1];
      if (pick) select(pick.run, pick.event);
      return;
    }
  }
  let at = now ? all.findIndex((s) => s.run === now.run && s.event === now.event) : -1;
  if (at < 0 && now) {
    // the selection is not a mark: step from where it is
    const after = all.findIndex((s) => s.run > now.run || (s.run === now.run && s.event > now.event));
    at = direction > 0 ? (after < 0 ? all.length : after) - 1 : (after < 0 ? all.length : after);
  }
  const next = now === null ? (direction > 0 ? 0 : all.length - 1) : at + direction;
  if (next >= 0 && next < all.length) {
    select(all[next].run, all[next].event);
    // stepping into the next run brings its timeline into the window
    view.runs[all[next].run].scroll.scrollIntoView({ block: 'nearest' });
  }
}

// The time zoom keeps at the centre of run `v`'s visible window: the selected event's
// moment (where its mark is, and its bars begin), or the cluster mark last opened, else
// the time at the centre.
function anchor(v, index) {
  if (view.selected && view.selected.run === index) return view.selected.t;
  if (view.focus && view.focus.run === index) return view.focus.t;
  return (v.scroll.scrollLeft + v.scroll.clientWidth / 2 - PAD) / view.scale;
}

function zoom(factor) {
  const anchors = view.runs.map((v, i) => anchor(v, i));
  if (factor === 0) fit();
  else view.scale = Math.min(MAX_SCALE, Math.max(view.fitted, view.scale * factor));
  view.runs.forEach((v, i) => {
    draw(i);
    v.scroll.scrollLeft = x(anchors[i]) - v.scroll.clientWidth / 2;
    relabel(v);
  });
  if (view.selected) highlight(view.selected.run);
}

function keys(event) {
  if (event.target && event.target.tagName === 'INPUT') return;
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
  legend(document.getElementById('legend'), data.runs);
  view.runs.forEach((v, i) => section(v, i, root));
  view.runs.forEach((v, i) => { draw(i); relabel(v); });
  glossary(document.getElementById('glossary'), data.runs);
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
