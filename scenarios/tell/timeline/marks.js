// The marks of a run: writes, gateway calls, faults, checks and the events of a chain that
// have no mark of their own. Marks that would fall within GAP px of each other on one row
// are told apart: two or three are dodged up and down the row, more become one cluster
// mark that says how many events it holds and lists them when clicked.

const GAP = 8;
const CHUNK = 30;
const WORST = ['breach', 'rejected', 'paid-again', 'lied', 'diagnostic', 'fault', 'chain-marker', 'replayed', 'found', 'paid', 'ok', 'none'];

function chainedEvents(run) {
  const chained = new Set();
  for (const chain of run.chains || []) for (const s of chain.steps || []) chained.add(s.event);
  return chained;
}

// A mark's words: its own, or, inside a fold (where the page keeps none, to stay small),
// told from its event.
function markLabel(v, mark) {
  if (mark.label) return mark.label;
  const data = eventOf(v, mark.event);
  if (!data) return `event ${mark.event}`;
  if (data.event === 'write') {
    const token = typeof data.token === 'number' ? `with token ${data.token}` : 'without a token';
    return `${data.worker}: ${data.write} ${data.refund} ${token}: ${data.rows} row(s)`;
  }
  if (data.event === 'refund_called') {
    const what = {
      created: `${money(data.amount)} leaves as gw#${data.gateway_ref}`,
      replayed: `answered from the idempotency record (gateway refund #${data.gateway_ref}), no money moves`,
      conflict: 'refused: the key is in flight',
    }[data.outcome] || data.outcome;
    return `${data.worker} pays ${data.refund}: ${what}`;
  }
  if (data.event === 'lookup') return `${data.worker} looks up ${data.refund}: ${data.found === null ? 'finds none' : `finds gw#${data.found}`}`;
  if (data.event === 'lookup_behind') return `the lookup of ${data.refund} lied: its copy was ${data.behind_ms} ms behind the ledger, which has gw#${data.gateway_ref}`;
  if (data.event === 'fault_fired') return `fault: ${data.kind}`;
  return `${data.actor}: ${data.event.replace(/_/g, ' ')}`;
}

function markWords(v, mark) {
  const label = markLabel(v, mark);
  return mark.rule ? `${label}. ${mark.rule}` : label;
}

const gatewayWords = (text) => text.replace(/gw#(\d+)/g, 'gateway refund #$1');

// The checks that did not hold, one item per event: two invariants (or an invariant and a
// diagnostic) broken by one event are one mark that names them all.
function checkItems(run) {
  const byEvent = new Map();
  for (const breach of run.breaches) {
    if (!byEvent.has(breach.event)) byEvent.set(breach.event, []);
    byEvent.get(breach.event).push(breach);
  }
  return [...byEvent.values()].map((broken) => {
    const first = broken[0];
    const failing = broken.some((b) => !b.diagnostic);
    const names = [...new Set(broken.map((b) => (b.diagnostic ? `${b.invariant} (a diagnostic)` : b.invariant)))];
    const words = broken.slice(0, 3).map((b) => `${b.invariant}: ${gatewayWords(b.detail)}`);
    if (broken.length > 3) words.push(`and ${broken.length - 3} more breaches at this event`);
    return { row: 'checks', t: first.at, event: first.event, line: first.line, cls: failing ? 'breach' : 'diagnostic', kind: 'check', shape: 'triangle',
      title: `${clock(run.base + first.at)}  did not hold: ${names.join(', ')}\n${words.join('\n')}` };
  });
}

// Every point-like thing to draw, by row.
function pointItems(v, rows) {
  const run = v.run;
  const items = [];
  const drawn = new Set();
  for (const mark of run.marks) {
    if (mark.fold !== null && mark.fold !== undefined && !v.open.has(mark.fold)) continue;
    const row = mark.lane === 'write' ? `w${mark.worker}:writes` : mark.lane === 'money' ? `gw${mark.worker}` : 'faults';
    items.push({ row, t: mark.at, event: mark.event, cls: mark.kind, kind: mark.lane, shape: mark.lane === 'fault' ? 'triangle' : 'circle',
      title: `${clock(run.base + mark.at)}  ${gatewayWords(markWords(v, mark))}` });
    drawn.add(mark.event);
  }
  for (const item of checkItems(run)) {
    items.push(item);
    drawn.add(item.event);
  }
  for (const b of [...run.believed, ...run.leases, ...run.bands, ...(run.delays || []), ...(run.downtime || [])]) drawn.add(b.event);
  for (const event of v.chained) {
    if (drawn.has(event)) continue;
    items.push({ row: chainRow(v, event, rows), t: timeOf(v, event), event, cls: 'chain-marker', kind: 'chain', shape: 'diamond',
      title: `${clock(run.base + timeOf(v, event))}  on the chain: ${chainText(run, event)}` });
  }
  return items;
}

function chainText(run, event) {
  for (const chain of run.chains || []) for (const s of chain.steps || []) if (s.event === event) return s.text;
  return '';
}

function workerIndex(v, event) {
  const data = eventOf(v, event) || {};
  let w = v.run.workers.indexOf(data.worker);
  if (w < 0 && typeof data.epoch === 'number') {
    const lease = v.run.leases.find((b) => b.epoch === data.epoch);
    if (lease) w = lease.worker;
  }
  return w;
}

// Where an event without a mark of its own is drawn: a lease event on its worker's
// "in Redis" row, a queue event on its worker's process row, else on the faults lane.
function chainRow(v, event, rows) {
  const data = eventOf(v, event) || {};
  const w = workerIndex(v, event);
  if (w < 0) return 'faults';
  const row = { redis: 'redis', queue: 'process', store: 'writes', faults: 'process' }[data.actor] || 'process';
  if (data.actor === 'gateway') return rows.has(`gw${w}`) ? `gw${w}` : 'faults';
  return `w${w}:${row}`;
}

// Groups the items of one row (sorted by time) into what is drawn.
function groups(items) {
  const out = [];
  let group = [];
  for (const item of items) {
    item.px = x(item.t);
    const last = group[group.length - 1];
    if (last && (item.px - last.px >= GAP || item.px - group[0].px > CHUNK)) { out.push(group); group = []; }
    group.push(item);
  }
  if (group.length) out.push(group);
  return out;
}

function shape(group, item, cx, cy) {
  el('svg:rect', { class: 'hitbox', x: cx - 4, y: cy - 4, width: 8, height: 8 }, group);
  const big = item.cls === 'rejected' || item.cls === 'paid-again';
  if (item.shape === 'triangle') {
    el('svg:path', { class: 'shape', d: `M${cx},${cy - 5} L${cx + 4.5},${cy + 4} L${cx - 4.5},${cy + 4} Z` }, group);
  } else if (item.shape === 'diamond') {
    el('svg:path', { class: 'shape', d: `M${cx},${cy - 5} L${cx + 4},${cy} L${cx},${cy + 5} L${cx - 4},${cy} Z` }, group);
  } else {
    el('svg:circle', { class: 'shape', cx: cx, cy: cy, r: big ? 4.5 : 3.5 }, group);
  }
  if (group.classList.contains('on-chain')) el('svg:circle', { class: 'ring', cx: cx, cy: cy, r: 7 }, group);
}

function single(svg, v, index, item, cy) {
  const group = hitGroup(svg, v, index, item);
  shape(group, item, item.px, cy);
}

function cluster(svg, v, index, members, box) {
  const worst = WORST.find((cls) => members.some((m) => m.cls === cls)) || 'none';
  const x1 = members[0].px, x2 = members[members.length - 1].px;
  const count = String(members.length);
  const width = Math.max(x2 - x1, measure(count) + 6);
  const mid = (x1 + x2) / 2;
  const t = (members[0].t + members[members.length - 1].t) / 2;
  const group = el('svg:g', { class: `cluster ${worst}`, 'data-run': index, 'data-t': t, 'data-row': box.key, 'data-count': members.length, 'data-events': members.map((m) => m.event).join(',') }, svg);
  group.events = members.map((m) => m.event);
  group.members = members;
  const kinds = [...new Set(members.map((m) => m.kind))].join(', ');
  el('svg:title', {}, group, `${members.length} events (${kinds}) from ${clock(v.run.base + members[0].t)} to ${clock(v.run.base + members[members.length - 1].t)}: click to list them`);
  if (members.some((m) => v.chained.has(m.event))) group.classList.add('on-chain');
  el('svg:rect', { class: 'shape', x: mid - width / 2, y: box.y + 2, width: width, height: box.h - 4, rx: 3 }, group);
  const text = el('svg:text', { class: 'count', x: mid, y: box.y + 12, 'text-anchor': 'middle' }, group, count);
  v.labels.push({ node: text, x1: mid - width / 2, x2: mid + width / 2, text: count, centred: true });
}

// Draws every point item; returns the events drawn, in order (for the arrow keys).
function points(svg, v, index, rows) {
  const byRow = new Map();
  for (const item of pointItems(v, rows)) {
    if (!rows.has(item.row)) continue;
    if (!byRow.has(item.row)) byRow.set(item.row, []);
    byRow.get(item.row).push(item);
  }
  const layer = el('svg:g', { class: 'points' }, svg);
  const events = new Set();
  for (const [key, items] of byRow) {
    const box = rows.get(key);
    items.sort((a, b) => a.t - b.t || a.event - b.event);
    const cy = box.y + box.h / 2;
    for (const group of groups(items)) {
      if (group.length > 3) cluster(layer, v, index, group, box);
      else {
        const offsets = group.length === 1 ? [0] : group.length === 2 ? [-3.5, 3.5] : [-5, 0, 5];
        group.forEach((item, i) => single(layer, v, index, item, cy + offsets[i]));
      }
      group.forEach((item) => events.add(item.event));
    }
  }
  for (const node of svg.querySelectorAll('.mark[data-event]')) events.add(Number(node.dataset.event));
  return [...events].sort((a, b) => a - b);
}
