// A run's timeline: the lanes (labels in an SVG of their own that does not scroll), the
// bars, the folds, and the labels fitted to what is visible of their bars.

const HIT = 10;

// The row a delay is drawn on: its worker's row of that hop.
function hopRow(d) {
  return d.hop === 'redis' ? `w${d.worker}:redis` : d.hop === 'database' ? `w${d.worker}:writes` : `gw${d.worker}`;
}

// An instance's name as a number to sort by: "redis" is 0, "redis#3" is 3.
function instanceOrder(hop) {
  const found = /#(\d+)$/.exec(hop);
  return found ? Number(found[1]) : 0;
}

// Spans that share a row, each given a level: two whose drawn extent (at least HIT px,
// as wide as its hit box) would overlap get different levels, so that each is drawn on a
// row of its own and can be clicked at its centre. Returns the number of levels.
function stack(spans) {
  const ends = [];
  const extent = (d) => {
    const x1 = x(d.from), x2 = Math.max(x(d.to), x1 + 1), wide = Math.max(HIT, x2 - x1);
    return [(x1 + x2 - wide) / 2, (x1 + x2 + wide) / 2];
  };
  for (const d of [...spans].sort((a, b) => a.from - b.from || a.event - b.event)) {
    const [left, right] = extent(d);
    let level = ends.findIndex((end) => end <= left);
    if (level < 0) level = ends.length;
    ends[level] = right + 1;
    d.level = level;
  }
  return ends.length;
}

// The spans of `list` by the row they belong on, each stacked (see `stack`).
function stacked(list, rowOf) {
  const byRow = new Map();
  for (const d of list || []) {
    const key = rowOf(d);
    if (!byRow.has(key)) byRow.set(key, []);
    byRow.get(key).push(d);
  }
  const levels = new Map();
  for (const [key, spans] of byRow) levels.set(key, stack(spans));
  return levels;
}

// The rows of run `v` from the top: each worker's four, the gateway's (one a worker),
// the faults', one for each Redis instance that went down, the checks', the rows'. The
// hold-ups of a worker's hop are on a row below that hop's, and spans that would overlap
// there or on an instance's row get a row below it for each more level.
function layout(v) {
  const run = v.run;
  const rows = new Map();
  let y = AXIS;
  const add = (key, label, gap) => { rows.set(key, { key, label, y, h: ROW }); y += ROW + (gap || 0); };
  const held = stacked(run.delays, hopRow);
  const more = (key, label) => {
    for (let level = 0; level < (held.get(key) || 0); level += 1) add(`${key}@${level}`, `${label}${level ? ` (${level + 1})` : ''}`);
  };
  run.workers.forEach((name, w) => {
    add(`w${w}:believes`, `${name} believes`);
    add(`w${w}:redis`, `${name} in Redis`);
    more(`w${w}:redis`, `${name} held up, Redis`);
    add(`w${w}:writes`, `${name} writes`);
    more(`w${w}:writes`, `${name} held up, database`);
    if (run.folds.some((f) => f.worker === w)) add(`w${w}:folds`, `${name} folded rows`);
    add(`w${w}:process`, `${name} process`, 6);
  });
  run.workers.forEach((name, w) => {
    add(`gw${w}`, `gateway, ${name}`);
    more(`gw${w}`, `${name} held up, gateway`);
  });
  add('faults', 'faults');
  const down = stacked(run.downtime, (d) => `down:${d.hop}`);
  const instances = [...down.keys()].sort((a, b) => instanceOrder(a) - instanceOrder(b));
  for (const key of instances) {
    for (let level = 0; level < down.get(key); level += 1) {
      add(level ? `${key}@${level}` : key, `${key.slice(5)} down${level ? ` (${level + 1})` : ''}`);
    }
  }
  add('checks', 'checks');
  const shown = v.allRows ? run.rows : run.rows.slice(0, ROWS_SHOWN);
  shown.forEach((row, i) => add(`row${i}`, `row ${row.refund}`));
  return { rows, height: y + 6, shown };
}

// A clickable thing drawn for `event`: a group holding its shape and a hit box of at
// least HIT px, so that a bar 2 px wide can still be clicked.
function hitGroup(parent, v, index, what) {
  const attrs = { class: `mark ${what.cls}`, 'data-run': index, 'data-kind': what.kind, 'data-t': what.t };
  if (what.event !== null && what.event !== undefined) attrs['data-event'] = what.event;
  if (what.line !== undefined) attrs['data-line'] = what.line;
  if (what.row) attrs['data-row'] = what.row;
  const group = el('svg:g', attrs, parent);
  if (what.title) el('svg:title', {}, group, what.title);
  if (v.chained.has(what.event)) group.classList.add('on-chain');
  return group;
}

function bar(parent, v, index, what) {
  const row = what.rowBox;
  const x1 = x(what.from), x2 = Math.max(x(what.to), x1 + 1);
  const group = hitGroup(parent, v, index, Object.assign({ t: (what.from + what.to) / 2, row: row.key }, what));
  const hitWidth = Math.max(HIT, x2 - x1);
  el('svg:rect', { class: 'hitbox', x: (x1 + x2 - hitWidth) / 2, y: row.y, width: hitWidth, height: row.h }, group);
  el('svg:rect', Object.assign({ class: 'shape', x: x1, y: row.y + 1, width: x2 - x1, height: Math.max(2, row.h - 2) }, what.attrs || {}), group);
  if (what.label) labelled(v, group, x1, x2, row.y + 12, what.label);
  return group;
}

// A label kept inside the visible part of its bar (see `relabel`).
function labelled(v, parent, x1, x2, y, text) {
  const node = el('svg:text', { x: x1 + 3, y: y, class: 'bar-label' }, parent);
  v.labels.push({ node, x1, x2, text });
}

const measured = new Map();
let pen = null;

function measure(text) {
  if (!measured.has(text)) {
    if (!pen) { pen = document.createElement('canvas').getContext('2d'); pen.font = '11px sans-serif'; }
    measured.set(text, pen.measureText(text).width);
  }
  return measured.get(text);
}

// `text`, or its first words and an ellipsis, to fit `room` px; '' if not even that fits.
function fitted(text, room) {
  if (measure(text) <= room) return text;
  const words = text.split(' ');
  for (let k = words.length - 1; k >= 1; k -= 1) {
    const shorter = `${words.slice(0, k).join(' ').replace(/[\s,:;(.]+$/, '')}\u2026`;
    if (measure(shorter) <= room) return shorter;
  }
  return '';
}

// Fits every bar label to the visible part of its bar, and draws the axis for what is in
// view: nothing is cut by the edge of the scrolled box.
function relabel(v) {
  if (!v.scroll) return;
  const left = v.scroll.scrollLeft, right = left + v.scroll.clientWidth;
  for (const label of v.labels) {
    if (label.centred) {
      // a cluster's count: whole within the visible part of its mark, or not at all
      const whole = label.x1 >= left && label.x2 <= right;
      if (label.node.textContent !== (whole ? label.text : '')) label.node.textContent = whole ? label.text : '';
      continue;
    }
    const from = Math.max(label.x1, left) + 3, to = Math.min(label.x2, right) - 3;
    const text = to - from > 8 ? fitted(label.text, to - from) : '';
    if (label.node.textContent !== text) label.node.textContent = text;
    label.node.setAttribute('x', from);
  }
  axis(v, left, right);
}

function axis(v, left, right) {
  const group = v.axis;
  if (!group) return;
  group.replaceChildren();
  const steps = [1, 2, 5].flatMap((f) => [1, 10, 100, 1000, 10000, 100000, 1000000].map((p) => f * p));
  const step = steps.sort((a, b) => a - b).find((s) => s * view.scale >= 100) || 3600000;
  const first = Math.max(0, Math.floor((left - PAD) / view.scale / step) * step);
  const width = Number(v.svg.getAttribute('width'));
  for (let t = first; x(t) <= Math.min(right, width); t += step) {
    el('svg:line', { x1: x(t), x2: x(t), y1: AXIS - 6, y2: v.height }, group);
    const text = clock(v.run.base + t).replace(/\.000$/, '');
    const at = x(t) + 2;
    if (at >= left && at + measure(text) <= Math.min(right, width) - 2) el('svg:text', { x: at, y: AXIS - 10 }, group, text);
  }
}

function laneLabels(v, rows, height) {
  const svg = el('svg:svg', { class: 'lanes', width: LABEL, height: height });
  for (const row of rows.values()) {
    el('svg:text', { x: 6, y: row.y + 12, class: 'lane-label' }, svg, row.label);
  }
  return svg;
}

function stripes(svg, v, rows) {
  const width = x(span()) + PAD;
  v.run.workers.forEach((_, w) => {
    const top = rows.get(`w${w}:believes`).y, bottom = rows.get(`w${w}:process`).y + ROW;
    el('svg:rect', { class: 'worker-lane', x: 0, y: top, width: width, height: bottom - top }, svg);
  });
}

function workerBars(svg, v, index, rows) {
  const run = v.run;
  for (const band of run.bands) {
    const top = rows.get(`w${band.worker}:believes`).y, bottom = rows.get(`w${band.worker}:process`).y + ROW;
    el('svg:rect', { class: 'band-shade', x: x(band.from), y: top, width: Math.max(1, x(band.to) - x(band.from)), height: bottom - top }, svg);
  }
  for (const b of run.believed) {
    bar(svg, v, index, { rowBox: rows.get(`w${b.worker}:believes`), from: b.from, to: b.to, event: b.event, kind: 'belief', cls: 'believed',
      label: b.label, title: `${b.label} (${clock(run.base + b.from)} to ${clock(run.base + b.to)})`, attrs: { stroke: COLORS[b.worker % COLORS.length] } });
  }
  for (const b of run.leases) {
    const row = rows.get(`w${b.worker}:redis`);
    const group = bar(svg, v, index, { rowBox: row, from: b.from, to: b.to, event: b.event, kind: 'lease', cls: 'lease',
      label: b.label, title: `${b.label}, from ${clock(run.base + b.from)} to ${clock(run.base + b.to)}`, attrs: { fill: COLORS[b.worker % COLORS.length] } });
    // each renewal a tick on the bar: the TTL started again there
    for (const at of b.renewals || []) {
      el('svg:line', { class: 'renewal', x1: x(at), x2: x(at), y1: row.y + 1, y2: row.y + row.h - 1 }, group);
    }
  }
  for (const b of run.bands) {
    bar(svg, v, index, { rowBox: rows.get(`w${b.worker}:process`), from: b.from, to: b.to, event: b.event, kind: 'band', cls: 'band',
      label: b.label, title: `${b.label}, from ${clock(run.base + b.from)}` });
  }
  for (const d of run.delays || []) {
    const row = rows.get(`${hopRow(d)}@${d.level}`);
    if (!row) continue;
    bar(svg, v, index, { rowBox: row, from: d.from, to: d.to, event: d.event, kind: 'delay', cls: 'delay', label: d.label, title: `${d.label} (${d.hop} hop, ${clock(run.base + d.from)} to ${clock(run.base + d.to)})` });
  }
  for (const d of run.downtime || []) {
    const key = d.level ? `down:${d.hop}@${d.level}` : `down:${d.hop}`;
    bar(svg, v, index, { rowBox: rows.get(key), from: d.from, to: d.to, event: d.event, kind: 'downtime', cls: 'downtime',
      label: d.label, title: `${d.label} (${clock(run.base + d.from)} to ${clock(run.base + d.to)})` });
  }
}

// Each fold on its worker's "folded rows" row, its hit box at least HIT px wide but no
// wider than halfway to the next fold, so that each can be clicked at its centre.
function folds(svg, v, index, rows) {
  const all = v.run.folds.map((fold, f) => ({ fold, f, x1: x(fold.from), x2: Math.max(x(fold.to), x(fold.from) + 2) }));
  for (const item of all) {
    const c = (item.x1 + item.x2) / 2;
    let left = Math.min(item.x1, c - HIT / 2), right = Math.max(item.x2, c + HIT / 2);
    for (const other of all) {
      if (other === item || other.fold.worker !== item.fold.worker) continue;
      const oc = (other.x1 + other.x2) / 2;
      if (oc < c) left = Math.max(left, Math.min(other.x2, (oc + c) / 2), Math.min(item.x1, (oc + c) / 2));
      if (oc > c) right = Math.min(right, Math.max(other.x1, (oc + c) / 2), Math.max(item.x2, (oc + c) / 2));
    }
    item.hit = [left, right];
  }
  for (const { fold, f, x1, x2, hit } of all) {
    const open = v.open.has(f);
    const row = rows.get(`w${fold.worker}:folds`);
    const cls = `fold${open ? ' open' : ''}${fold.kind === 'skipped' ? ' skipped' : ''}`;
    const group = el('svg:g', { class: cls, 'data-fold': f, 'data-run': index }, svg);
    el('svg:title', {}, group, `${fold.label} (click to ${open ? 'fold it again' : 'open it'})`);
    el('svg:rect', { class: 'hitbox', x: hit[0], y: row.y, width: hit[1] - hit[0], height: row.h }, group);
    el('svg:rect', { class: 'shape', x: x1, y: row.y + 1, width: x2 - x1, height: row.h - 2 }, group);
    labelled(v, group, x1, x2, row.y + 12, open ? `${fold.label} (open: click to fold)` : fold.label);
  }
}

function rowLanes(svg, v, index, rows, shown) {
  shown.forEach((row, i) => {
    const box = rows.get(`row${i}`);
    let from = 0, state = 'pending', fence = null, event = null;
    const segments = [];
    for (const [at, next, nextFence, nextEvent] of row.changes) {
      segments.push([from, at, state, fence, event]);
      [from, state, fence, event] = [at, next, nextFence, nextEvent];
    }
    segments.push([from, v.run.end, state, fence, event]);
    for (const [start, end, what, f, e] of segments) {
      const text = f === null ? what : `${what}, fence ${f}`;
      const title = `${row.refund}: ${text} from ${clock(v.run.base + start)}`;
      const group = e === null
        ? el('svg:g', { class: 'state' }, svg)
        : hitGroup(svg, v, index, { event: e, kind: 'state', cls: 'state', t: (start + end) / 2, title: title });
      if (e === null) el('svg:title', {}, group, title);
      el('svg:rect', { class: `shape state-${what}`, x: x(start), y: box.y + 2, width: Math.max(0.5, x(end) - x(start)), height: box.h - 4 }, group);
      labelled(v, group, x(start), x(end), box.y + 12, text);
    }
  });
}

function draw(index) {
  const v = view.runs[index];
  v.chained = chainedEvents(v.run);
  const { rows, height, shown } = layout(v);
  v.rows = rows;
  v.height = height;
  v.labels = [];
  const svg = el('svg:svg', { width: x(span()) + PAD, height: height, class: 'timeline', 'data-run': index });
  if (v.onlyChain) svg.classList.add('only-chain');
  v.svg = svg;
  stripes(svg, v, rows);
  v.axis = el('svg:g', { class: 'axis' }, svg);
  workerBars(svg, v, index, rows);
  folds(svg, v, index, rows);
  rowLanes(svg, v, index, rows, shown);
  v.visible = points(svg, v, index, rows);
  svg.addEventListener('click', (event) => clicked(v, index, event));
  v.labelsBox.replaceChildren(laneLabels(v, rows, height));
  const left = v.scroll.scrollLeft;
  v.scroll.replaceChildren(svg);
  v.scroll.scrollLeft = left;
  v.more.hidden = v.run.rows.length <= ROWS_SHOWN;
  v.more.textContent = v.allRows ? 'show the first rows only' : `show all ${v.run.rows.length} rows that were not routine`;
  relabel(v);
  if (view.selected && view.selected.run === index) highlight(index);
}

// One handler for the whole timeline: the thing under the pointer, and only it.
function clicked(v, index, event) {
  const fold = event.target.closest('.fold');
  if (fold) {
    const f = Number(fold.dataset.fold);
    if (v.open.has(f)) v.open.delete(f);
    else v.open.add(f);
    event.stopPropagation();
    draw(index);
    return;
  }
  const cluster = event.target.closest('.cluster');
  if (cluster) { showCluster(v, index, cluster); return; }
  const mark = event.target.closest('.mark[data-event]');
  if (mark) select(index, Number(mark.dataset.event), mark.dataset.line === undefined ? undefined : Number(mark.dataset.line));
}
