// Charts drawn as inline SVG: bars, a time series of finished runs, run durations, a run's
// timeline, and a graph of runs with their edges (pipelines and DAGs). Colours come from the
// stylesheet through the f-<state> classes.

import {html, raw, esc, dur, enc} from './lib.js';

// bars draws horizontal bars, one per [label, value, cls].
export function bars(items, {width = 420, unit = ''} = {}) {
  const row = 22, labelW = 90, max = Math.max(1, ...items.map(i => i[1]));
  const h = items.length * row;
  const body = items.map(([label, v, cls], i) => {
    const w = Math.max(v > 0 ? 2 : 0, (width - labelW - 50) * v / max);
    const y = i * row;
    return `<text x="0" y="${y + 15}" class="lbl">${esc(label)}</text>` +
      `<rect x="${labelW}" y="${y + 4}" width="${w.toFixed(1)}" height="14" rx="2" class="f-${esc(cls || label)}"/>` +
      `<text x="${labelW + w + 6}" y="${y + 15}" class="val">${esc(v)}${esc(unit)}</text>`;
  }).join('');
  return raw(`<svg class="chart" viewBox="0 0 ${width} ${h}" width="${width}" height="${h}" role="img">${body}</svg>`);
}

// series draws finished runs per time bucket as stacked bars (succeeded under failed) and the
// failure rate as a line: buckets is [{t, ok, failed}], oldest first.
export function series(buckets, {width = 560, height = 150, step = 60} = {}) {
  const padL = 34, padB = 18, padR = 40, w = width - padL - padR, h = height - padB - 8;
  const max = Math.max(1, ...buckets.map(b => b.ok + b.failed));
  const bw = w / Math.max(1, buckets.length);
  let out = '';
  const pts = [];
  buckets.forEach((b, i) => {
    const x = padL + i * bw;
    const hOK = h * b.ok / max, hF = h * b.failed / max;
    const tip = `${new Date(b.t).toLocaleTimeString()}: ${b.ok} succeeded, ${b.failed} failed`;
    out += `<g><title>${esc(tip)}</title>`;
    if (b.ok) out += `<rect x="${(x + 1).toFixed(1)}" y="${(8 + h - hOK).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${hOK.toFixed(1)}" class="f-succeeded"/>`;
    if (b.failed) out += `<rect x="${(x + 1).toFixed(1)}" y="${(8 + h - hOK - hF).toFixed(1)}" width="${(bw - 2).toFixed(1)}" height="${hF.toFixed(1)}" class="f-failed"/>`;
    out += '</g>';
    const n = b.ok + b.failed;
    if (n) pts.push(`${(x + bw / 2).toFixed(1)},${(8 + h - h * b.failed / n).toFixed(1)}`);
  });
  if (pts.length > 1) out += `<polyline points="${pts.join(' ')}" class="rate"/>`;
  // axes: runs on the left, failure rate on the right, time below
  out += `<line x1="${padL}" y1="${8 + h}" x2="${padL + w}" y2="${8 + h}" class="axis"/>`;
  out += `<text x="${padL - 4}" y="14" class="tick" text-anchor="end">${max}</text><text x="${padL - 4}" y="${8 + h}" class="tick" text-anchor="end">0</text>`;
  out += `<text x="${padL + w + 4}" y="14" class="tick rate-t">100%</text><text x="${padL + w + 4}" y="${8 + h}" class="tick rate-t">0%</text>`;
  if (buckets.length) {
    const first = new Date(buckets[0].t), last = new Date(buckets[buckets.length - 1].t + step * 1000);
    out += `<text x="${padL}" y="${height - 3}" class="tick">${esc(first.toLocaleTimeString())}</text>`;
    out += `<text x="${padL + w}" y="${height - 3}" class="tick" text-anchor="end">${esc(last.toLocaleTimeString())}</text>`;
  }
  return raw(`<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img">${out}</svg>`);
}

// durations draws one bar per run (oldest left), its height the run's duration, coloured by
// its state; each bar links to the run.
export function durations(runs, {width = 560, height = 140} = {}) {
  const padL = 40, padB = 6, w = width - padL - 4, h = height - padB - 8;
  const secs = runs.map(r => r.seconds ?? 0);
  const max = Math.max(0.001, ...secs);
  const bw = Math.min(24, w / Math.max(1, runs.length));
  let out = '';
  runs.forEach((r, i) => {
    const bh = Math.max(1, h * (r.seconds ?? 0) / max);
    const x = padL + i * bw;
    out += `<a href="/ui/runs/${enc(r.id)}"><rect x="${(x + 1).toFixed(1)}" y="${(8 + h - bh).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${bh.toFixed(1)}" class="f-${esc(r.status)}"><title>${esc(r.status)} · ${esc(r.seconds === null ? 'not started' : dur(r.seconds))}</title></rect></a>`;
  });
  out += `<line x1="${padL}" y1="${8 + h}" x2="${width - 4}" y2="${8 + h}" class="axis"/>`;
  out += `<text x="${padL - 4}" y="14" class="tick" text-anchor="end">${esc(dur(max))}</text><text x="${padL - 4}" y="${8 + h}" class="tick" text-anchor="end">0</text>`;
  return raw(`<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img">${out}</svg>`);
}

// timeline draws a run's life: created, due, and each attempt as a bar from its start to its
// end (or now), coloured by how it ended.
export function timeline(run, now = Date.now()) {
  const t = s => new Date(s).getTime();
  const events = [t(run.created_at), t(run.scheduled_for), now];
  for (const a of run.attempts || []) events.push(t(a.started_at), a.finished_at ? t(a.finished_at) : now);
  const end = run.finished_at ? t(run.finished_at) : now;
  const t0 = Math.min(...events), t1 = Math.max(end, ...events.filter(e => e <= end), t0 + 1);
  const width = 720, padL = 90, padR = 70, w = width - padL - padR, row = 24;
  const x = v => padL + w * (Math.min(v, t1) - t0) / (t1 - t0);
  const rows = [];
  rows.push(['created', t(run.created_at), null, 'mark']);
  rows.push(['due', t(run.scheduled_for), null, 'mark']);
  for (const a of run.attempts || []) rows.push([`attempt ${a.n}`, t(a.started_at), a.finished_at ? t(a.finished_at) : now, a.status]);
  if (run.finished_at) rows.push([run.status, t(run.finished_at), null, 'mark']);
  let out = '';
  rows.forEach(([label, a, b, cls], i) => {
    const y = i * row + 4;
    out += `<text x="0" y="${y + 13}" class="lbl">${esc(label)}</text>`;
    if (b === null) {
      out += `<circle cx="${x(a).toFixed(1)}" cy="${y + 9}" r="5" class="f-mark"/>`;
      out += `<text x="${(x(a) + 9).toFixed(1)}" y="${y + 13}" class="tick">${esc(new Date(a).toLocaleTimeString())}</text>`;
    } else {
      const bw = Math.max(3, x(b) - x(a));
      out += `<rect x="${x(a).toFixed(1)}" y="${y + 2}" width="${bw.toFixed(1)}" height="14" rx="2" class="f-${esc(cls)}"/>`;
      out += `<text x="${(x(a) + bw + 6).toFixed(1)}" y="${y + 13}" class="tick">${esc(dur((b - a) / 1000))}</text>`;
    }
  });
  const h = rows.length * row + 8;
  return raw(`<svg class="chart" viewBox="0 0 ${width} ${h}" width="${width}" height="${h}" role="img">${out}</svg>`);
}

// graph draws nodes [{name, status, href, sub}] with edges [{from, to, condition}] (from is
// upstream) in layers, each node one layer right of its furthest upstream.
export function graph(nodes, edges) {
  const byName = new Map(nodes.map(n => [n.name, n]));
  const ups = new Map(nodes.map(n => [n.name, []]));
  for (const e of edges) if (byName.has(e.from) && byName.has(e.to)) ups.get(e.to).push(e.from);
  const layer = new Map();
  const depth = (n, seen = new Set()) => {
    if (layer.has(n)) return layer.get(n);
    if (seen.has(n)) return 0; // a cycle cannot happen, but never loop
    seen.add(n);
    const d = Math.max(-1, ...ups.get(n).map(u => depth(u, seen))) + 1;
    layer.set(n, d);
    return d;
  };
  nodes.forEach(n => depth(n.name));
  const cols = [];
  for (const n of nodes) (cols[layer.get(n.name)] ||= []).push(n);
  const nw = 170, nh = 46, gx = 70, gy = 22;
  const pos = new Map();
  cols.forEach((col, i) => col.forEach((n, j) => pos.set(n.name, {x: 10 + i * (nw + gx), y: 10 + j * (nh + gy)})));
  const width = 20 + cols.length * (nw + gx) - gx, height = 20 + Math.max(...cols.map(c => c.length)) * (nh + gy) - gy;
  let out = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0L10,5L0,10z" class="arrowhead"/></marker></defs>';
  for (const e of edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + nw, y1 = a.y + nh / 2, x2 = b.x, y2 = b.y + nh / 2, mx = (x1 + x2) / 2;
    out += `<path d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}" class="edge${e.condition && e.condition !== 'succeeded' ? ' edge-' + esc(e.condition) : ''}" marker-end="url(#arrow)"><title>${esc(e.from)} → ${esc(e.to)} on ${esc(e.condition || 'succeeded')}</title></path>`;
  }
  for (const n of nodes) {
    const p = pos.get(n.name);
    const box = `<rect x="${p.x}" y="${p.y}" width="${nw}" height="${nh}" rx="6" class="node f-${esc(n.status || 'none')}"/>` +
      `<text x="${p.x + 10}" y="${p.y + 19}" class="node-name">${esc(n.name.length > 22 ? n.name.slice(0, 21) + '…' : n.name)}</text>` +
      `<text x="${p.x + 10}" y="${p.y + 36}" class="node-sub">${esc(n.sub || n.status || '')}</text>`;
    out += n.href ? `<a href="${esc(n.href)}" data-node="${esc(n.name)}" data-state="${esc(n.status || '')}">${box}</a>` : `<g data-node="${esc(n.name)}" data-state="${esc(n.status || '')}">${box}</g>`;
  }
  return html`<div class="graph">${raw(`<svg class="chart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img">${out}</svg>`)}</div>`;
}
