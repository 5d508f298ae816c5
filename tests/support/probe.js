// What the browser tests read off a timeline page, evaluated in the page: the things a
// person can click (found in the DOM), where their centres are once scrolled into view,
// what the detail panel and the story show after a click, and the drawn layout. The
// expected story line is worked out here from the page's data, not taken from the page.
window.probe = (() => {
  const sections = () => [...document.querySelectorAll('section.run')];
  const story = (run) => view.runs[run].run.story;
  // the line of event `e`: its own, else the last one told before it
  function lineFor(run, e) {
    const lines = story(run);
    let before = 0;
    for (let i = 0; i < lines.length; i += 1) {
      if (lines[i].event === e) return i;
      if (lines[i].event < e) before = i;
    }
    return before;
  }
  function shown(run) {
    const section = sections()[run];
    const panel = section.querySelector('.event');
    if (panel && panel.dataset.event !== undefined) return Number(panel.dataset.event);
    const mark = section.querySelector('svg .mark.selected[data-event]');
    return mark ? Number(mark.dataset.event) : null;
  }
  function highlighted(run) {
    const line = sections()[run].querySelector('.story > .selected');
    return line ? [...line.parentNode.children].indexOf(line) : null;
  }
  const runOf = (node) => sections().indexOf(node.closest('section.run'));
  let targets = [];
  function target(find, kind, run, event, line) {
    return { find, kind, run, event, line };
  }
  function nth(selector, n) {
    return () => document.querySelectorAll(selector)[n];
  }
  function wide(node) {
    const shape = node.querySelector && node.querySelector('.shape');
    return shape ? shape.getBoundingClientRect().width : 99;
  }
  const collectors = {
    marks() {
      const nodes = [...document.querySelectorAll('section.run svg .mark[data-event]')];
      return nodes.filter((n) => n.dataset.kind !== 'state' || wide(n) >= 3).map((n) => {
        const run = runOf(n), e = Number(n.dataset.event);
        const line = n.dataset.line !== undefined ? Number(n.dataset.line) : lineFor(run, e);
        return target(() => n, n.dataset.kind || n.tagName, run, e, line);
      });
    },
    story() {
      const nodes = [...document.querySelectorAll('section.run .story > *')];
      return nodes.map((n) => {
        const run = runOf(n), i = [...n.parentNode.children].indexOf(n);
        return target(() => n, 'story line', run, story(run)[i].event, i);
      });
    },
    chain() {
      return [...document.querySelectorAll('section.run .why li[data-event]')].map((n) => {
        const run = runOf(n), e = Number(n.dataset.event);
        return target(() => n, 'chain step', run, e, lineFor(run, e));
      });
    },
    clusters() {
      return [...document.querySelectorAll('section.run svg .cluster')].map((n) => target(() => n, 'cluster', runOf(n), null, null));
    },
  };
  function collect(what, filter) {
    targets = collectors[what]();
    if (filter) targets = targets.filter(filter);
    return targets.length;
  }
  // the members listed after a click on a cluster of run `run`: the first, the last, and
  // up to `more` between
  function members(run, more) {
    const selector = `section.run:nth-of-type(${run + 1}) .detail li[data-pick]`;
    const nodes = [...document.querySelectorAll(selector)];
    const picked = new Set([0, nodes.length - 1]);
    for (let k = 1; k <= more; k += 1) picked.add(Math.floor((k * nodes.length) / (more + 1)));
    targets = [...picked].filter((k) => k >= 0 && k < nodes.length).map((k) => {
      const n = nodes[k], e = Number(n.dataset.pick);
      const line = n.dataset.line !== undefined ? Number(n.dataset.line) : lineFor(run, e);
      return target(nth(selector, k), 'cluster member', run, e, line);
    });
    return targets.length;
  }
  function describe(node) {
    if (!node) return 'nothing';
    const mark = node.closest('.mark, .cluster, .fold, .line, li, text');
    const at = mark || node;
    return `${at.tagName}.${(at.getAttribute('class') || '').replace(/ /g, '.')}${at.dataset && at.dataset.event ? `[${at.dataset.event}]` : ''}`;
  }
  // scrolls target `i` into view; its centre (of its visible part) and what is on top there
  function aim(i) {
    const t = targets[i], node = t.find();
    node.scrollIntoView({ block: 'center', inline: 'center' });
    let r = node.getBoundingClientRect();
    const box = node.closest('.scroll');
    if (box) {
      const b = box.getBoundingClientRect();
      r = { left: Math.max(r.left, b.left), right: Math.min(r.right, b.right), top: r.top, bottom: r.bottom };
    }
    const x = (r.left + r.right) / 2, y = (r.top + r.bottom) / 2;
    const hit = document.elementFromPoint(x, y);
    const covered = !(hit && (hit === node || node.contains(hit)));
    const name = `run ${t.run} ${t.kind}${t.event === null ? '' : ` event ${t.event}`}`;
    return { x, y, run: t.run, covered: covered ? `${name} is under ${describe(hit)}` : null, clusterCount: t.kind === 'cluster' ? node.dataset.count : null };
  }
  function check(i) {
    const t = targets[i];
    const name = `run ${t.run} ${t.kind} ${t.event === null ? '' : `event ${t.event}`}`;
    if (t.kind === 'cluster') {
      const panel = sections()[t.run].querySelector('.event');
      const count = panel && panel.dataset.cluster;
      return count === t.find().dataset.count ? null : `${name}: the panel lists ${count} events, not ${t.find().dataset.count}`;
    }
    const [event, line] = [shown(t.run), highlighted(t.run)];
    if (event === t.event && line === t.line) return null;
    return `${name}: shows event ${event}, highlights line ${line} (want line ${t.line})`;
  }
  function step(i) {
    return { check: i > 0 ? check(i - 1) : null, aim: i < targets.length ? aim(i) : null };
  }
  // every check that did not hold, by invariant and event, that no mark names: each is a
  // check mark at its event (or a member of a cluster mark) whose words name it
  function unnamed() {
    const missing = new Set();
    view.runs.forEach((v, run) => {
      const svg = sections()[run].querySelector('svg.timeline');
      for (const b of v.run.breaches) {
        const mark = svg.querySelector(`.mark[data-kind="check"][data-event="${b.event}"] > title`);
        const named = mark ? mark.textContent.includes(b.invariant)
          : [...svg.querySelectorAll('.cluster')].some((c) => (c.members || []).some((m) => m.kind === 'check' && m.event === b.event && m.title.includes(b.invariant)));
        if (!named) missing.add(`run ${run}: ${b.invariant}, broken by event ${b.event}`);
      }
    });
    return [...missing];
  }
  return { collect, members, aim, check, step, shown, highlighted, lineFor, sections, describe, unnamed };
})();
true
