// A run's section: its heading, what broke and why, the timeline, the story, and the
// detail panel that tells a selected event in words first and its raw JSON below.

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

// What the run's payments moved, in words and figures: the sum a teacher says out loud.
function moneyLine(run, box) {
  const m = run.money;
  const refunds = (n) => (n === 1 ? '1 refund' : `${n.toLocaleString('en')} refunds`);
  const p = el('p', { class: m.paid_twice ? 'money paid-twice' : 'money' }, box);
  el('strong', {}, p, 'Money: ');
  const twice = m.paid_twice
    ? `; ${refunds(m.paid_twice)} paid more than once, ${money(m.extra)} more than was owed`
    : '; no refund was paid twice';
  p.appendChild(document.createTextNode(
    `${money(m.moved)} left the merchant in ${m.payments.toLocaleString('en')} payment${m.payments === 1 ? '' : 's'} for ${refunds(m.refunds)}${twice}.`));
}

function section(v, index, parent) {
  const run = v.run;
  const box = el('section', { class: 'run', id: `run-${index}` }, parent);
  v.box = box;
  fill(el('h2', {}, box), withTerms(run.title));
  why(v, index, box);
  const broken = [...new Set(run.breaches.filter((b) => !b.diagnostic).map((b) => b.invariant))];
  const p = para(box, ['mechanism ', [`mechanism-${run.mechanism}`, run.mechanism], `, ${run.gateway} gateway, seed ${run.seed}, `, ['trace-hash', 'trace hash'], ` ${run.trace_hash}: `]);
  el('span', { class: run.passed ? 'verdict passed' : 'verdict failed' }, p,
    run.passed ? 'every invariant held' : `broke ${broken.join(', ')}`);
  moneyLine(run, box);
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
    fill(el('strong', {}, p), [[`invariant-${name}`, name]]);
    if (!one) text(`${i ? '' : ' broke'}${at(name)}`);
  });
  if (one) text(` broke${at(names[0])}`);
  text(names.length > 1 ? ', by one chain. ' : '. ');
}

// "What would have stopped it": each change a failing run's chains point to, once, with
// the invariants it would have kept and what it concerns.
function fixes(run, div) {
  const kept = new Map();
  for (const fix of run.fixes || []) {
    const key = `${fix.change}|${fix.concerns}`;
    if (kept.has(key)) kept.get(key).names.push(fix.invariant);
    else kept.set(key, { fix, names: [fix.invariant] });
  }
  if (!kept.size) return;
  el('h3', {}, div, 'What would have stopped it');
  const list = el('ul', { class: 'fixes' }, div);
  for (const { fix, names } of kept.values()) {
    const item = el('li', { class: 'fix' }, list);
    el('strong', {}, item, `${names.join(', ')}: `);
    coded(item, `${fix.change.replace(/^./, (c) => c.toUpperCase())}.`);
    coded(el('span', { class: 'concerns' }, item, ' Where: '), `${fix.concerns}.`);
  }
}

// `text` into `node`, each `...` part (a statement, a setting, a name) as code.
function coded(node, text) {
  text.split(/`([^`]*)`/).forEach((part, i) => {
    if (i % 2) el('code', {}, node, part);
    else if (part) fill(node, withTerms(part));
  });
  return node;
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
  fixes(v.run, div);
  div.addEventListener('click', (event) => {
    const item = event.target.closest('li[data-event]');
    if (!item) return;
    select(index, Number(item.dataset.event));
    // the chain sits above the timeline: bring the event's words into the window
    v.detail.scrollIntoView({ block: 'nearest' });
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
    const item = el('li', { class: breach.diagnostic ? 'diagnostic' : 'invariant', 'data-event': breach.event, 'data-line': breach.line }, list, name);
    if (breach.diagnostic) para(item, [' (a ', ['diagnostic', 'diagnostic'], ': shown, does not fail a run)'], 'inline');
    item.appendChild(document.createTextNode(`: ${count === 1 ? 'once' : `${count} times`}, first at ${clock(v.run.base + breach.at)}: ${breach.detail.replace(/gw#(\d+)/g, 'gateway refund #$1')}`));
    item.addEventListener('click', (event) => { if (!event.target.closest('a')) select(index, breach.event, breach.line); });
  }
}

// Every write of each row that changed it (one row updated), with its image after, in
// the history's order: what a row held. A write that updated nothing changed nothing,
// whatever row it read back.
function writesOf(v) {
  if (v.writes) return v.writes;
  v.writes = new Map();
  v.run.events.forEach((raw, i) => {
    if (!raw.includes('"event":"write"') || raw.includes('"after":null')) return;
    const data = eventOf(v, i);
    if (!data.after || data.rows < 1) return;
    if (!v.writes.has(data.refund)) v.writes.set(data.refund, []);
    v.writes.get(data.refund).push({ event: i, data });
  });
  return v.writes;
}

// The lease key event `index` concerns: its own, its epoch's, or its worker's latest lease's.
function keyOf(v, data, index) {
  const run = v.run;
  if (data.key && run.leases.some((b) => b.key === data.key)) return data.key;
  const own = typeof data.epoch === 'number' ? run.leases.find((b) => b.epoch === data.epoch) : null;
  if (own) return own.key;
  const lane = run.workers.indexOf(data.worker);
  const mine = run.leases.filter((b) => b.worker === lane && b.event <= index);
  return mine.length ? mine[mine.length - 1].key : null;
}

// What the page tells of event `index`, worked out from the history's order (an event
// came while a lease was live when its index lies between the lease's grant and the event
// that ended it; milliseconds cannot order the events of one millisecond): the lease
// Redis held on the key the event concerns once it had happened, the actor's own lease,
// the row before and after it, and the money it moved. tests/told_truth.rs holds every
// fact to the history.
function told(v, index) {
  const data = eventOf(v, index);
  if (!data) return null;
  const run = v.run;
  const live = (b) => b.event <= index && index < b.until;
  const key = keyOf(v, data, index);
  const holders = key ? run.leases.filter((b) => b.key === key && live(b)) : [];
  const holder = holders[holders.length - 1];
  const own = typeof data.epoch === 'number' && data.worker ? run.leases.find((b) => b.epoch === data.epoch) : null;
  return {
    key,
    holder: holder ? { worker: run.workers[holder.worker], epoch: holder.epoch, since: holder.from } : null,
    own: own ? { worker: data.worker, epoch: own.epoch, live: live(own), ended: live(own) ? null : own.to } : null,
    token: typeof data.token === 'number' || data.token === null ? data.token : undefined,
    row: rowTold(v, data, index),
    money: moneyTold(data),
  };
}

function rowTold(v, data, index) {
  if (!data.refund || data.event === 'refunds_arrived') return null;
  const earlier = (writesOf(v).get(data.refund) || []).filter((w) => w.event < index);
  const last = earlier[earlier.length - 1];
  const before = last ? { state: last.data.after.state, fence: last.data.after.fence, at: last.data.at,
    worker: last.data.worker, write: last.data.write } : null;
  const changed = data.event === 'write' && data.after && data.rows >= 1;
  const after = data.event !== 'write' ? undefined : changed ? { state: data.after.state, fence: data.after.fence } : null;
  return { refund: data.refund, before, after, write: data.write, rows: data.rows };
}

function moneyTold(data) {
  if (data.event === 'lookup') return { worker: data.worker, refund: data.refund, found: data.found };
  if (data.event !== 'refund_called') return null;
  const moved = data.outcome === 'created' ? data.amount : 0;
  return { worker: data.worker, refund: data.refund, amount: data.amount, outcome: data.outcome, moved, gateway_ref: data.gateway_ref };
}

function rowWords(facts) {
  const row = facts.row;
  if (!row) return null;
  const b = row.before;
  const words = b
    ? [`Row ${row.refund} held `, `${b.state}, `, ['fence', 'fence'], ` ${b.fence} (since ${b.at}, ${b.worker}'s ${b.write})`]
    : [`Row ${row.refund} was still pending: no write had changed it`];
  if (row.after === undefined) words.push(' at that moment.');
  else if (row.after) words.push(`; this ${row.write} left it ${row.after.state}, fence ${row.after.fence}.`);
  else words.push(`; this ${row.write} changed nothing (${row.rows} rows).`);
  return words;
}

function leaseWords(v, facts) {
  const run = v.run;
  if (!facts.key) return null;
  const h = facts.holder;
  const parts = h
    ? ['Redis held the ', ['lease', 'lease'], ` ${facts.key} for ${h.worker} (`, ['epoch', 'epoch'], ` ${h.epoch}, since ${clock(run.base + h.since)})`]
    : ['Redis held no ', ['lease', 'lease'], ` on ${facts.key} once this had happened`];
  const own = facts.own;
  if (!own) parts.push('.');
  else if (own.live) parts.push(`; ${own.worker}'s own lease (epoch ${own.epoch}) was live.`);
  else parts.push(`; ${own.worker}'s own lease (epoch ${own.epoch}) had ended at ${clock(run.base + own.ended)}: it acted without a live lease.`);
  return parts;
}

function moneyWords(facts) {
  const m = facts.money;
  if (!m) return null;
  if (m.found !== undefined) {
    return m.found === null ? [`${m.worker} asked the gateway about ${m.refund}: it had no refund for it.`]
      : [`${m.worker} asked the gateway about ${m.refund}: it had gateway refund #${m.found}.`];
  }
  const outcome = {
    created: `${money(m.moved)} left the merchant as gateway refund #${m.gateway_ref}.`,
    replayed: ['the gateway answered from its record of the ', ['idempotency-key', 'idempotency key'], `: gateway refund #${m.gateway_ref}, no money moved.`],
    conflict: ['the gateway refused: a call with the same ', ['idempotency-key', 'idempotency key'], ' was still in flight.'],
  }[m.outcome] || `${m.outcome}.`;
  return [`${m.worker} asked the gateway to refund ${m.refund} (${money(m.amount)}): `].concat(outcome);
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
  el('h3', {}, panel, `${data.at}  ${data.actor}: ${data.event.replace(/_/g, ' ')}`);
  const storyLine = v.run.story[line];
  if (storyLine) {
    const own = storyLine.event === event ? 'The story' : 'The story, last told before it';
    para(panel, [`${own}: `, ...withTerms(`${storyLine.actor} ${storyLine.text.replace(/\(gw#(\d+)\)/g, '(gateway refund #$1)')}`)], 'told');
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
  const facts = told(v, event);
  if (facts.token !== undefined) {
    para(panel, ['It carried ', ['token', facts.token === null ? 'no token' : `token ${facts.token}`], '.']);
  }
  for (const words of [rowWords(facts), leaseWords(v, facts), moneyWords(facts)]) {
    if (words) para(panel, words);
  }
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
