// A run's section: its heading, what broke and why, the timeline, the story, and the
// detail panel that tells a selected event in words first and its raw JSON below.

function epochOf(lease) {
  const found = /epoch (\d+)/.exec(lease.label);
  return found ? Number(found[1]) : null;
}

// `8430000` as "84,300.00 EUR", as the trace's words show amounts.
function money(cents) {
  const sign = cents < 0 ? '-' : '', whole = Math.abs(cents);
  const euros = String(Math.floor(whole / 100)).replace(/\B(?=(\d{3})+$)/g, ',');
  return `${sign}${euros}.${String(whole % 100).padStart(2, '0')} EUR`;
}

// A paragraph whose parts are text, or [term, words] for a word linked to the glossary.
function para(parent, parts, cls) {
  return fill(el('p', cls ? { class: cls } : {}, parent), parts);
}

function fill(node, parts) {
  for (const part of parts) {
    if (typeof part === 'string') node.appendChild(document.createTextNode(part));
    else el('a', { href: `#term-${part[0]}`, class: 'term' }, node, part[1]);
  }
  return node;
}

const WORDS = [['idempotency key', 'idempotency-key'], ['visibility timeout', 'visibility-timeout'], ['lease', 'lease'], ['epoch', 'epoch'],
  ['token', 'token'], ['fence', 'fence'], ['majority', 'majority'], ['persistence', 'persistence'], ['mutant', 'mutant']];
const WORDS_FOUND = new RegExp(`\\b(${WORDS.map(([w]) => w).join('|')})\\b`, 'i');

// `text` as parts for `para`, the first use of each glossary word in it linked.
function withTerms(text) {
  const parts = [];
  const done = new Set();
  let rest = text;
  for (let found = WORDS_FOUND.exec(rest); found; found = WORDS_FOUND.exec(rest)) {
    const id = WORDS.find(([w]) => w === found[1].toLowerCase())[1];
    parts.push(rest.slice(0, found.index));
    parts.push(done.has(id) ? found[1] : [id, found[1]]);
    done.add(id);
    rest = rest.slice(found.index + found[1].length);
  }
  parts.push(rest);
  return parts;
}

function section(v, index, parent) {
  const run = v.run;
  const box = el('section', { class: 'run', id: `run-${index}` }, parent);
  v.box = box;
  fill(el('h2', {}, box), withTerms(run.title));
  why(v, index, box);
  const broken = [...new Set(run.breaches.filter((b) => !b.diagnostic).map((b) => b.invariant))];
  const p = para(box, [`mechanism ${run.mechanism}, ${run.gateway} gateway, seed ${run.seed}, `, ['trace-hash', 'trace hash'], ` ${run.trace_hash}: `]);
  el('span', { class: run.passed ? 'verdict passed' : 'verdict failed' }, p,
    run.passed ? 'every invariant held' : `broke ${broken.join(', ')}`);
  const again = el('p', {}, box, 'Run it again: ');
  el('span', { class: 'replay' }, again, run.replay);
  broke(v, index, box);
  const timeline = el('div', { class: 'timeline-box' }, box);
  v.labelsBox = el('div', { class: 'lane-labels' }, timeline);
  v.scroll = el('div', { class: 'scroll' }, timeline);
  let queued = false;
  v.scroll.addEventListener('scroll', () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; relabel(v); });
  });
  v.more = el('button', { class: 'more-rows' }, box);
  v.more.addEventListener('click', () => { v.allRows = !v.allRows; draw(index); });
  const panels = el('div', { class: 'panels' }, box);
  v.story = el('div', { class: 'story', tabindex: 0 }, panels);
  const breached = new Set(run.breaches.map((b) => b.line));
  run.story.forEach((line, i) => {
    const row = el('div', { class: breached.has(i) ? 'line breached' : 'line', 'data-line': i, 'data-event': line.event }, v.story);
    el('span', { class: 'when' }, row, `${clock(run.base + line.at)} ${line.actor}`);
    row.appendChild(document.createTextNode(` ${line.text.replace(/\(gw#(\d+)\)/g, '(gateway refund #$1)')}`));
  });
  v.story.addEventListener('click', (event) => {
    const row = event.target.closest('.line');
    if (row) select(index, run.story[Number(row.dataset.line)].event, Number(row.dataset.line));
  });
  v.detail = el('div', { class: 'detail event', 'data-run': index }, panels);
  el('p', { class: 'hint' }, v.detail, 'Select a mark, a bar or a line of the story to see its event here.');
  v.detail.addEventListener('click', (event) => {
    const item = event.target.closest('[data-pick]');
    if (item) select(index, Number(item.dataset.pick), item.dataset.line === undefined ? undefined : Number(item.dataset.line));
  });
}

// `text` into `node`, each "[...]" part (a protocol's rule and how a write fared by it)
// set apart in a quieter span, so that what happened reads first.
function ruled(node, text) {
  for (const part of text.replace(/gw#(\d+)/g, 'gateway refund #$1').split(/(\[[^\]]*\])/)) {
    if (part.startsWith('[')) el('span', { class: 'rule-words' }, node, part);
    else if (part) node.appendChild(document.createTextNode(part));
  }
  return node;
}

// The chains of a run, those that tell the same steps the same way kept once with the
// names of every invariant they explain.
function sameChains(chains) {
  const kept = [];
  for (const chain of chains) {
    const key = JSON.stringify([chain.found, chain.summary, chain.steps]);
    const same = kept.find((k) => k.key === key);
    if (same) same.names.push(chain.invariant);
    else kept.push({ key, chain, names: [chain.invariant] });
  }
  return kept;
}

// "X broke at T1 and Y at T2, by one chain. ": each invariant with its first breach's time.
function broken(v, p, names) {
  const first = (name) => v.run.breaches.find((b) => b.invariant === name);
  const when = (name) => (first(name) ? clock(v.run.base + first(name).at) : null);
  const one = names.every((name) => when(name) === when(names[0]));
  const text = (t) => p.appendChild(document.createTextNode(t));
  const at = (name) => (when(name) ? ` at ${when(name)}` : '');
  names.forEach((name, i) => {
    if (i) text(i === names.length - 1 ? ' and ' : ', ');
    el('strong', {}, p, name);
    if (!one) text(`${i ? '' : ' broke'}${at(name)}`);
  });
  if (one) text(` broke${at(names[0])}`);
  text(names.length > 1 ? ', by one chain. ' : '. ');
}

// "Why it broke": per chain of a failing run, what broke and when, its summary and its
// steps, each clickable.
function why(v, index, box) {
  const chains = v.run.chains || [];
  if (v.run.passed || !chains.length) return;
  const div = el('div', { class: 'why' }, box);
  el('h3', {}, div, 'Why it broke');
  for (const { chain, names } of sameChains(chains)) {
    const p = el('p', { class: chain.found ? 'summary' : 'summary unfound' }, div);
    broken(v, p, names);
    ruled(el('span', { class: 'because' }, p), chain.summary.replace(/^./, (c) => c.toUpperCase()));
    if (!(chain.steps || []).length) continue;
    const list = el('ol', { class: 'chain' }, div);
    for (const s of chain.steps) {
      const item = el('li', { 'data-run': index, 'data-event': s.event }, list);
      el('span', { class: 'when' }, item, clock(v.run.base + s.at));
      ruled(item, ` ${s.text}`);
    }
  }
  div.addEventListener('click', (event) => {
    const item = event.target.closest('li[data-event]');
    if (item) select(index, Number(item.dataset.event));
  });
  if (!chains.some((c) => c.found && (c.steps || []).length)) return;
  const label = el('label', { class: 'only' }, div);
  const box2 = el('input', { type: 'checkbox' }, label);
  label.appendChild(document.createTextNode(' show only the chain (dim every other mark)'));
  v.onlyChain = true;
  box2.checked = true;
  box2.addEventListener('change', () => { v.onlyChain = box2.checked; v.svg.classList.toggle('only-chain', v.onlyChain); });
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
    const item = el('li', { class: breach.diagnostic ? 'diagnostic' : 'invariant', 'data-event': breach.event, 'data-line': breach.line }, list, `${name}`);
    if (breach.diagnostic) para(item, [' (a ', ['diagnostic', 'diagnostic'], ': shown, does not fail a run)'], 'inline');
    item.appendChild(document.createTextNode(`: ${count} time(s), first at ${clock(v.run.base + breach.at)}: ${breach.detail.replace(/gw#(\d+)/g, 'gateway refund #$1')}`));
    item.addEventListener('click', (event) => { if (!event.target.closest('a')) select(index, breach.event, breach.line); });
  }
}

// Every accepted write of each row with its image after, in order: what a row held.
function writesOf(v) {
  if (v.writes) return v.writes;
  v.writes = new Map();
  v.run.events.forEach((raw, i) => {
    if (!raw.includes('"event":"write"') || raw.includes('"after":null')) return;
    const data = eventOf(v, i);
    if (!data.after) return;
    if (!v.writes.has(data.refund)) v.writes.set(data.refund, []);
    v.writes.get(data.refund).push({ event: i, data });
  });
  return v.writes;
}

function rowWords(v, data, event) {
  if (!data.refund) return null;
  const earlier = (writesOf(v).get(data.refund) || []).filter((w) => w.event < event);
  const last = earlier[earlier.length - 1];
  const before = last
    ? [`Row ${data.refund} held `, `${last.data.after.state}, `, ['fence', 'fence'], ` ${last.data.after.fence} (since ${last.data.at}, ${last.data.worker}'s ${last.data.write})`]
    : [`Row ${data.refund} was still pending: no write had changed it`];
  if (data.event === 'write') {
    before.push(data.after ? `; this ${data.write} left it ${data.after.state}, fence ${data.after.fence}.` : `; this ${data.write} changed nothing (${data.rows} rows).`);
  } else before.push(' at that moment.');
  return before;
}

function leaseWords(v, data, t) {
  const run = v.run;
  const held = run.leases.find((b) => b.from <= t && t < b.to);
  const parts = held
    ? ['Redis held the ', ['lease', 'lease'], ` for ${run.workers[held.worker]} (`, ['epoch', 'epoch'], ` ${epochOf(held)}, since ${clock(run.base + held.from)})`]
    : ['Redis held no ', ['lease', 'lease'], ' at that moment'];
  if (typeof data.epoch === 'number' && data.worker) {
    const own = run.leases.find((b) => epochOf(b) === data.epoch);
    if (own && own.from <= t && t < own.to) parts.push(`; ${data.worker}'s own lease (epoch ${data.epoch}) was live.`);
    else if (own) parts.push(`; ${data.worker}'s own lease (epoch ${data.epoch}) had ended at ${clock(run.base + own.to)}: it acted without a live lease.`);
    else parts.push('.');
  } else parts.push('.');
  return parts;
}

function moneyWords(data) {
  if (data.event !== 'refund_called' && data.event !== 'lookup') return null;
  if (data.event === 'lookup') {
    return data.found === null ? [`${data.worker} asked the gateway about ${data.refund}: it had no refund for it.`]
      : [`${data.worker} asked the gateway about ${data.refund}: it had gateway refund #${data.found}.`];
  }
  const outcome = {
    created: `${money(data.amount)} left the merchant as gateway refund #${data.gateway_ref}.`,
    replayed: ['the gateway answered from its record of the ', ['idempotency-key', 'idempotency key'], `: gateway refund #${data.gateway_ref}, no money moved.`],
    conflict: ['the gateway refused: a call with the same ', ['idempotency-key', 'idempotency key'], ' was still in flight.'],
  }[data.outcome] || `${data.outcome}.`;
  return [`${data.worker} asked the gateway to refund ${data.refund} (${money(data.amount)}): `].concat(outcome);
}

function showEvent(v, index, event, line) {
  const panel = v.detail;
  panel.replaceChildren();
  panel.dataset.event = event;
  panel.dataset.run = index;
  delete panel.dataset.cluster;
  if (v.openCluster && v.openCluster.events.includes(event)) members(v, panel, v.openCluster, event);
  else v.openCluster = null;
  const data = eventOf(v, event);
  if (!data) {
    el('h3', {}, panel, `event ${event} of ${v.run.event_count}`);
    para(panel, [`Event ${event} is a routine step and not kept on this page, which keeps the events its marks, bars and story tell.`]);
    return;
  }
  const t = timeOf(v, event);
  el('h3', {}, panel, `${data.at}  ${data.actor}: ${data.event.replace(/_/g, ' ')}`);
  const told = v.run.story[line];
  if (told) {
    const own = told.event === event ? 'The story' : 'The story, last told before it';
    para(panel, [`${own}: `, ...withTerms(`${told.actor} ${told.text.replace(/\(gw#(\d+)\)/g, '(gateway refund #$1)')}`)], 'told');
  }
  for (const mark of v.run.marks.filter((m) => m.event === event)) {
    para(panel, withTerms(gatewayWords(markLabel(v, mark))));
    if (mark.rule) para(panel, ['The ', ['fence', 'fence'], `'s rule: ${mark.rule}`], 'rule');
  }
  const broken = v.run.breaches.filter((b) => b.event === event);
  for (const breach of broken.slice(0, 5)) {
    para(panel, [`${breach.invariant}${breach.diagnostic ? ' (a diagnostic)' : ''}: ${gatewayWords(breach.detail)}`], 'broken');
  }
  if (broken.length > 5) para(panel, [`and ${broken.length - 5} more breaches at this event`], 'broken');
  if (typeof data.token === 'number' || data.token === null) {
    para(panel, ['It carried ', ['token', data.token === null ? 'no token' : `token ${data.token}`], '.']);
  }
  const row = rowWords(v, data, event);
  if (row) para(panel, row);
  para(panel, leaseWords(v, data, t));
  const paid = moneyWords(data);
  if (paid) para(panel, paid);
  el('h4', {}, panel, 'Raw event (a line of the trace)');
  el('pre', {}, panel, JSON.stringify(data, null, 2));
}

function showCluster(v, index, node) {
  const panel = v.detail;
  panel.replaceChildren();
  delete panel.dataset.event;
  panel.dataset.run = index;
  panel.dataset.cluster = node.events.length;
  for (const other of view.runs) clearSelection(other);
  // nothing is selected; zoom keeps the cluster where it is
  view.selected = null;
  view.focus = { run: index, t: Number(node.dataset.t) };
  node.classList.add('selected');
  v.openCluster = { events: node.events, members: node.members };
  members(v, panel, v.openCluster, null);
}

// The events of a cluster mark, each clickable; `picked` is the one shown below.
function members(v, panel, cluster, picked) {
  const box = el('div', { class: 'cluster-list' }, panel);
  el('h3', {}, box, `${cluster.events.length} events drawn as one mark: click one to see it`);
  const list = el('ol', { class: 'members' }, box);
  for (const m of cluster.members) {
    const attrs = { 'data-pick': m.event };
    if (m.line !== undefined) attrs['data-line'] = m.line;
    if (m.event === picked) attrs.class = 'picked';
    el('li', attrs, list, m.title);
  }
}
