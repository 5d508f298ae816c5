// The drawn layout of a timeline page, as the browser laid it out: every label (svg text)
// that is outside its bar, its lane, its scrolled box or the viewport; every two marks
// drawn on one spot (centres within 3 px on one row) that are not one cluster mark; and
// whether each run's lane labels are on screen.
(() => {
  const inside = (r, b, slack) => r.left >= b.left - slack && r.right <= b.right + slack && r.top >= b.top - slack && r.bottom <= b.bottom + slack;
  const show = (r) => `[${r.left.toFixed(0)}..${r.right.toFixed(0)} x ${r.top.toFixed(0)}..${r.bottom.toFixed(0)}]`;
  const outside = [];
  for (const text of document.querySelectorAll('section.run svg text')) {
    if (!text.textContent) continue;
    const r = text.getBoundingClientRect();
    const svg = text.ownerSVGElement.getBoundingClientRect();
    const what = `"${text.textContent}" ${show(r)}`;
    if (!inside(r, svg, 1)) { outside.push(`${what} outside its svg ${show(svg)}`); continue; }
    const scroll = text.closest('.scroll');
    if (scroll) {
      const b = scroll.getBoundingClientRect();
      if (r.left < b.left - 1 || r.right > b.right + 1) outside.push(`${what} cut by the edge of the scrolled box ${show(b)}`);
    } else if (r.left < 0 || r.right > innerWidth) outside.push(`${what} outside the viewport`);
    const owner = text.parentNode.querySelector(':scope > .shape');
    if (owner && !text.classList.contains('count')) {
      const s = owner.getBoundingClientRect();
      if (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 3 || r.bottom > s.bottom + 3) outside.push(`${what} outside its bar ${show(s)}`);
    }
  }
  const spots = [];
  for (const svg of document.querySelectorAll('section.run svg.timeline')) {
    const rows = new Map();
    for (const node of svg.querySelectorAll('.points > .mark, .points > .cluster')) {
      const r = node.querySelector('.shape').getBoundingClientRect();
      const key = node.dataset.row;
      if (!rows.has(key)) rows.set(key, []);
      rows.get(key).push({ x: (r.left + r.right) / 2, y: (r.top + r.bottom) / 2, node });
    }
    for (const [key, marks] of rows) {
      marks.sort((a, b) => a.x - b.x);
      for (let i = 0; i < marks.length; i += 1) {
        for (let j = i + 1; j < marks.length && marks[j].x - marks[i].x < 3; j += 1) {
          if (Math.hypot(marks[j].x - marks[i].x, marks[j].y - marks[i].y) < 3) {
            spots.push(`run ${svg.dataset.run} row ${key}: events ${marks[i].node.dataset.event} and ${marks[j].node.dataset.event} at (${marks[i].x.toFixed(0)}, ${marks[i].y.toFixed(0)})`);
          }
        }
      }
    }
  }
  const lanes = [...document.querySelectorAll('section.run')].map((section) => {
    const label = section.querySelector('.lane-label');
    if (!label) return 'no lane label';
    label.scrollIntoView({ block: 'center' });
    const r = label.getBoundingClientRect();
    const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
    const seen = r.left >= 0 && r.right <= innerWidth && hit && hit.closest('svg') === label.ownerSVGElement;
    return seen ? null : `"${label.textContent}" at ${show(r)} is not on screen (${hit ? hit.tagName : 'nothing'} there)`;
  });
  return { outside, spots, lanes: lanes.filter((l) => l) };
})()
