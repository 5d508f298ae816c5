// The legend (every kind of mark and bar the page's timelines draw, in words) and the glossary
// (every word the page uses that a reader may not know), each term with an id to link.

const TERMS = [
  ['lease', 'lease', 'The right to work on a merchant\'s refunds for a while, held as a key in Redis with a time to live (TTL). When the TTL runs out Redis deletes the key and may grant it to another worker; nothing tells the first holder, which may still believe it holds the lease.'],
  ['epoch', 'epoch', 'One grant of the lease by Redis, numbered in order: epoch 1 from A\'s grant until the key expired, epoch 2 from B\'s grant. A worker whose epoch has ended no longer holds the lease, whatever it believes.'],
  ['token', 'token', 'A number a worker takes right after it is granted the lease, from a counter in Redis (INCR) or from a sequence in the refund database, as its mechanism says (each mechanism\'s entry below names its source): each grant gets a larger one. The worker sends it with every write to the database.'],
  ['fence', 'fence', 'The largest token a row has seen, stored in the row itself. The database accepts a claim only with a token greater than the row\'s fence, and a confirm only with a token equal to it, so a writer whose lease has been handed on is turned away. In a run without a fence (the TTL lease alone) every write carries no token and the column stays at fence 0: nothing is compared.'],
  ['diagnostic', 'diagnostic (two holders)', 'A check that is shown but does not fail a run. Two workers believing they hold the lease at once (single-holder) is one: with a TTL lease it happens whenever a holder freezes past its TTL, and it is harmless if the fence turns the stale holder away. What must never happen is its effect: a row confirmed by a stale holder, or money paid twice.'],
  ['mutant', 'mutant', 'A bug planted on purpose in the code under test (for example, releasing the lock with a GET and then a DEL) to show that the checks catch it: a mutant\'s run must fail.'],
  ['majority', 'majority', 'With several Redis instances (the multi-instance lock), a lease counts only if more than half of the instances granted it in time.'],
  ['persistence', 'persistence', 'Whether a Redis instance writes its keys to disk. An instance without it forgets every lease and counter when it restarts, so it may grant a lease that is still held, or give out a token it gave before.'],
  ['trace-hash', 'trace hash', 'A hash of every event of the run, in order. Two runs with the same hash happened the same way: running the command again gives the same hash.'],
  ['idempotency-key', 'idempotency key', 'A key sent with each refund call (here the refund\'s id). An idempotent gateway that sees a key again answers with the refund it made the first time and moves no money; a non-idempotent one pays again.'],
  ['visibility-timeout', 'visibility timeout', 'How long the queue waits for a worker to acknowledge a job it handed out. When it runs out the job becomes visible again and is handed to another worker.'],
];

const LEGEND = [
  ['circle ok', 'a write the database accepted (a claim or a confirm, or a posting to the settlement ledger)'],
  ['circle rejected', 'a write turned away by a newer fence: it changed 0 rows (the fence\'s rule in its detail)'],
  ['circle none', 'a write that changed nothing with no fence at work (no token, or the row already sent by another holder), a lookup that found nothing, or a refused call'],
  ['circle paid', 'a refund that moved money'],
  ['circle paid-again', 'money paid again for a row already paid'],
  ['circle posted-again', 'a refund posted to the settlement ledger (the second store) again'],
  ['circle replayed', 'the gateway answered from its idempotency record: no money moved'],
  ['circle found', 'a lookup that found the refund at the gateway'],
  ['circle lied', 'a lookup that found nothing though the gateway had made the refund: it read a copy that lags the ledger'],
  ['triangle fault', 'a fault fired (a pause, a crash, a delay, a restart)'],
  ['triangle breach', 'a check that did not hold: one mark for each event that broke any, naming every check it broke'],
  ['triangle diagnostic', 'a diagnostic: shown, does not fail a run'],
  ['cluster none', 'several events too close to tell apart at this zoom: the number says how many; click it to list them, or zoom in'],
  ['bar believed', 'what a worker believes: it holds the lease, with its token'],
  ['bar lease', 'what Redis really granted: one epoch of the lease'],
  ['tick renewal', 'a renewal: its holder extended the lease, whose TTL started again there'],
  ['bar band', 'a worker frozen (paused) or crashed; the shade covers its lane'],
  ['bar delay', 'a message held up on its way (on a row below its hop\'s: Redis, the database or the gateway)'],
  ['bar downtime', 'a Redis instance down'],
  ['bar fold', 'a stretch of routine rows folded into one band: click it to open it'],
  ['bar fold skipped', 'a stretch of rows a worker went past without changing them, folded: click it to open it'],
  ['bar state-pending', 'a row pending (not yet claimed)'],
  ['bar state-sending', 'a row sending (claimed), with its fence'],
  ['bar state-sent', 'a row sent (confirmed), with its fence'],
  ['circle ok on-chain', 'an event on the chain of why a run broke'],
  ['diamond chain-marker', 'an event on the chain that has no mark of its own (a lease expiry, a queue event)'],
];

function swatch(parent, kind) {
  const [form, ...classes] = kind.split(' ');
  const svg = el('svg:svg', { width: 26, height: 14, class: 'swatch' }, parent);
  const group = el('svg:g', { class: `mark ${classes.join(' ')}` }, svg);
  if (form === 'circle') el('svg:circle', { class: 'shape', cx: 13, cy: 7, r: classes[0] === 'rejected' || classes[0] === 'paid-again' ? 4.5 : 3.5 }, group);
  else if (form === 'triangle') el('svg:path', { class: 'shape', d: 'M13,2 L17.5,11 L8.5,11 Z' }, group);
  else if (form === 'diamond') el('svg:path', { class: 'shape', d: 'M13,2 L17,7 L13,12 L9,7 Z' }, group);
  else if (form === 'cluster') {
    group.setAttribute('class', 'cluster none');
    el('svg:rect', { class: 'shape', x: 3, y: 1, width: 20, height: 12, rx: 3 }, group);
    el('svg:text', { class: 'count', x: 13, y: 11, 'text-anchor': 'middle' }, group, '12');
  } else if (form === 'tick') {
    el('svg:rect', { class: 'shape lease', x: 1, y: 2, width: 24, height: 10, fill: COLORS[0] }, group);
    el('svg:line', { class: 'renewal', x1: 13, x2: 13, y1: 2, y2: 12 }, group);
  } else {
    if (classes[0] === 'fold') group.setAttribute('class', classes.join(' '));
    el('svg:rect', { class: `shape ${classes.join(' ')}`, x: 1, y: 2, width: 24, height: 10, stroke: COLORS[0], fill: classes[0] === 'lease' ? COLORS[0] : undefined }, group);
  }
  if (classes.includes('on-chain')) el('svg:circle', { class: 'ring', cx: 13, cy: 7, r: 6.5 }, group);
}

// The legend's kinds that the page's runs draw (a cluster mark may appear at any zoom).
function drawnKinds(runs) {
  const kinds = new Set(['cluster none']);
  const bars = { believed: 'bar believed', leases: 'bar lease', bands: 'bar band', delays: 'bar delay', downtime: 'bar downtime' };
  for (const run of runs) {
    for (const mark of run.marks) kinds.add(mark.lane === 'fault' ? 'triangle fault' : `circle ${mark.kind}`);
    for (const breach of run.breaches) kinds.add(breach.diagnostic ? 'triangle diagnostic' : 'triangle breach');
    for (const [key, kind] of Object.entries(bars)) if ((run[key] || []).length) kinds.add(kind);
    if (run.leases.some((b) => (b.renewals || []).length)) kinds.add('tick renewal');
    for (const fold of run.folds) kinds.add(fold.kind === 'skipped' ? 'bar fold skipped' : 'bar fold');
    for (const row of run.rows) {
      kinds.add('bar state-pending');
      for (const change of row.changes) kinds.add(`bar state-${change[1]}`);
    }
    if ((run.chains || []).some((c) => (c.steps || []).length)) ['circle ok on-chain', 'diamond chain-marker'].forEach((k) => kinds.add(k));
  }
  return kinds;
}

// "; in its worker's colour: A ▬, B ▬": the colours the bars of one kind are drawn in.
function workerColours(item, kind, runs) {
  const names = runs.reduce((most, run) => (run.workers.length > most.length ? run.workers : most), []);
  item.appendChild(document.createTextNode('; in its worker\'s colour:'));
  names.forEach((name, w) => {
    const svg = el('svg:svg', { width: 18, height: 12, class: 'swatch worker-colour' }, item);
    const colour = COLORS[w % COLORS.length];
    el('svg:rect', kind === 'bar lease' ? { x: 1, y: 2, width: 16, height: 8, fill: colour }
      : { x: 1, y: 2, width: 16, height: 8, fill: 'none', stroke: colour, 'stroke-width': 2 }, svg);
    item.appendChild(document.createTextNode(`${name}${w < names.length - 1 ? ',' : ''}`));
  });
}

const WIDE_PX = 1300;

function legend(parent, runs) {
  if (!parent) return;
  parent.replaceChildren();
  // open where there is room for it beside the timeline's height; folded on a narrow
  // window, where it would push the timeline below the fold
  const details = el('details', window.innerWidth >= WIDE_PX ? { open: '' } : {}, parent);
  el('summary', {}, details, 'Legend: what each mark and bar on this page means');
  const list = el('ul', { class: 'legend' }, details);
  const drawn = drawnKinds(runs);
  for (const [kind, words] of LEGEND.filter(([k]) => drawn.has(k))) {
    const item = el('li', {}, list);
    swatch(item, kind);
    item.appendChild(document.createTextNode(` ${words}`));
    if (kind === 'bar believed' || kind === 'bar lease') workerColours(item, kind, runs);
  }
  para(details, ['Each worker has its rows: what it believes, its ', ['lease', 'lease'], ' in Redis (',
    ['epoch', 'epochs'], '), its writes to the database (each with its ', ['token', 'token'], ', checked against the row\'s ',
    ['fence', 'fence'], '), its routine rows folded, and its process (frozen or crashed). Money moves on the gateway rows, one a worker. ',
    'Hover over a mark for its words; click it for its event.'], 'lanes-help');
}

// The fixed terms, then the names the page's runs use (their mechanisms, the invariants
// and diagnostics they name), each once.
function glossary(parent, runs) {
  if (!parent) return;
  parent.replaceChildren();
  el('h2', {}, parent, 'Glossary');
  const list = el('dl', {}, parent);
  const seen = new Set();
  const named = (runs || []).flatMap((run) => run.terms || []).map((t) => [t.id, t.term, t.words]);
  for (const [id, term, words] of [...TERMS, ...named]) {
    if (seen.has(id)) continue;
    seen.add(id);
    el('dt', { id: `term-${id}` }, list, term);
    el('dd', {}, list, words);
  }
}
