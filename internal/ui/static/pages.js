// The pages: each route's address, what it draws once (mount) and what it draws again on
// every poll (live), and the actions its buttons call.

import {api, optional, streamLogs, html, raw, enc, ago, dur, when, state, shortID, runLink, jobLink,
  runSeconds, runStates} from './lib.js';
import {bars, series, durations, timeline, graph} from './charts.js';
import {app, login} from './app.js';

const canOperate = () => ['admin', 'operator'].includes(app.me?.role);
// op shows markup (a button) only to a role that may use it.
const op = markup => canOperate() ? markup : '';

const page = (title, body) => html`<h1>${title}</h1>${body}`;
const card = (title, body, cls = '') => html`<section class="card ${cls}"><h2>${title}</h2>${body}</section>`;
const table = (head, rows, empty = 'Nothing here.') => rows.length
  ? html`<table><thead><tr>${head.map(h => html`<th>${h}</th>`)}</tr></thead><tbody>${rows}</tbody></table>`
  : html`<p class="muted">${empty}</p>`;
const pretty = v => JSON.stringify(v, null, 2);
const qs = params => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null) q.set(k, v);
  const s = q.toString();
  return s ? '?' + s : '';
};

// ---- overview ----

const bucketSecs = 120, buckets = 30;

async function overview() {
  const [queues, workers, recent, queued, alerts] = await Promise.all([
    api('/v1/queues'), api('/v1/workers'), api('/v1/runs?limit=1000'),
    api('/v1/runs?status=queued&limit=1000'), optional('/v1/alerts?state=firing'),
  ]);
  const now = Date.now();
  // Active runs by status, from the queues' depths; ended ones from the latest runs.
  const active = {waiting: 0, scheduled: 0, queued: 0, running: 0};
  for (const q of queues.items) for (const s of Object.keys(active)) active[s] += q.depth[s] || 0;
  const ended = {succeeded: 0, failed: 0, cancelled: 0, skipped: 0};
  const start = now - bucketSecs * buckets * 1000;
  const series_ = Array.from({length: buckets}, (_, i) => ({t: start + i * bucketSecs * 1000, ok: 0, failed: 0}));
  let lateness = [];
  for (const r of recent.items) {
    if (r.status in ended) ended[r.status]++;
    if (r.finished_at) {
      const i = Math.floor((new Date(r.finished_at).getTime() - start) / (bucketSecs * 1000));
      if (i >= 0 && i < buckets) {
        if (r.status === 'succeeded') series_[i].ok++;
        else if (r.status === 'failed') series_[i].failed++;
      }
    }
    if (r.trigger === 'cron' && r.started_at) {
      lateness.push((new Date(r.started_at) - new Date(r.instant || r.scheduled_for)) / 1000);
    }
  }
  lateness.sort((a, b) => a - b);
  const finished = series_.reduce((n, b) => n + b.ok + b.failed, 0);
  const failedN = series_.reduce((n, b) => n + b.failed, 0);
  const oldest = queued.items.length ? queued.items[queued.items.length - 1] : null;
  const depth = queues.items.map(q => [q.name, q.depth.queued || 0, 'queued']);
  const slots = workers.items.reduce((a, w) => [a[0] + w.used.slots, a[1] + w.capacity.slots], [0, 0]);
  const wstates = {};
  for (const w of workers.items) wstates[w.state] = (wstates[w.state] || 0) + 1;
  const firing = alerts ? alerts.alerts || [] : null;

  return page('Overview', html`<div class="grid">
    ${card('Active runs', bars(Object.entries(active)))}
    ${card(html`Ended <small>(latest ${recent.items.length} runs)</small>`, bars(Object.entries(ended)))}
    ${card(html`Throughput and failure rate <small>(last hour, per ${bucketSecs / 60} minutes)</small>`, html`
      ${series(series_, {step: bucketSecs, width: 1100})}
      <p class="legend"><span class="key f-succeeded"></span>succeeded <span class="key f-failed"></span>failed
        <span class="key rate-k"></span>failure rate · ${finished} finished, ${finished ? Math.round(100 * failedN / finished) : 0}% failed</p>`, 'wide')}
    ${card('Queue depth', html`${bars(depth.length ? depth : [['default', 0, 'queued']])}
      <p class="stat" data-stat="oldest-queued">Oldest queued run: ${oldest
        ? html`${runLink(oldest)} waiting ${dur((now - new Date(oldest.scheduled_for)) / 1000)}${queued.next_cursor ? ' (of the latest 1000 queued)' : ''}`
        : 'none'}</p>`)}
    ${card('Schedule lateness', lateness.length
      ? html`<p class="big">${dur(Math.max(0, lateness[Math.floor(lateness.length / 2)]))} <small>median</small></p>
        <p class="stat">max ${dur(Math.max(0, lateness[lateness.length - 1]))} over the latest ${lateness.length} cron runs: from the instant a run was due to its first start</p>`
      : html`<p class="muted">No cron run has started among the latest runs.</p>`)}
    ${card('Workers', html`<p class="big">${slots[0]} / ${slots[1]} <small>slots used</small></p>
      ${bars(Object.entries(wstates).map(([s, n]) => [s, n, 'w-' + s]))}
      <p><a href="/ui/workers">${workers.items.length} worker${workers.items.length === 1 ? '' : 's'}</a></p>`)}
    ${card('Active alerts', firing === null
      ? html`<p class="muted" data-alerts="none">No alerts (this server has no alerting).</p>`
      : firing.length === 0 ? html`<p class="muted" data-alerts="none">No alerts firing.</p>`
        : html`<ul class="alerts">${firing.map(a => html`<li data-alert="${a.id}"><span class="state s-failed">${a.rule}</span>
            ${uiPath(a.link) ? html`<a href="${uiPath(a.link)}">${a.summary || a.subject}</a>` : a.summary || a.subject}
            <small>since ${ago(a.started_at)}</small></li>`)}</ul>`, 'wide')}
  </div>`);
}

// uiPath is the page of this UI an alert's link names: the link is a path ("/ui/jobs/<id>")
// or, from a server with --alert-link-base, a URL whose path is one; '' for anything else.
function uiPath(link) {
  if (!link) return '';
  let u;
  try { u = new URL(link, location.origin); } catch { return ''; }
  return u.pathname.startsWith('/ui/') ? u.pathname + u.search : '';
}

// ---- jobs ----

function jobsMount(ctx) {
  const q = ctx.query;
  return page('Jobs', html`<form class="filters" data-form="filterJobs">
    <input name="name" placeholder="name contains" value="${q.get('name') || ''}">
    <input name="namespace" placeholder="namespace" value="${q.get('namespace') || ''}">
    <input name="queue" placeholder="queue" value="${q.get('queue') || ''}">
    <select name="enabled">${['', 'true', 'false'].map(v => html`<option value="${v}" ${q.get('enabled') === v ? raw('selected') : ''}>${v === '' ? 'enabled or paused' : v === 'true' ? 'enabled' : 'paused'}</option>`)}</select>
    <button>Filter</button></form>`);
}

async function jobsLive(ctx) {
  const q = ctx.query;
  const [jobs, recent] = await Promise.all([
    api('/v1/jobs' + qs({namespace: q.get('namespace'), queue: q.get('queue'), enabled: q.get('enabled'), limit: 500})),
    api('/v1/runs?limit=1000'),
  ]);
  const last = new Map();
  for (const r of recent.items) if (!last.has(r.job_id)) last.set(r.job_id, r);
  const name = (q.get('name') || '').toLowerCase();
  const rows = jobs.items.filter(j => !name || j.name.toLowerCase().includes(name)).map(j => {
    const lr = last.get(j.id);
    return html`<tr data-job="${j.id}"><td>${jobLink(j.id, j.name)}</td><td>${j.namespace}</td><td>${j.queue}</td>
      <td class="mono">${j.schedule ? j.schedule.cron || j.schedule.every || '' : ''}</td>
      <td>${j.enabled ? 'enabled' : html`<span class="state s-paused">paused</span>`}</td>
      <td>${lr ? html`${state(lr.status)} ${runLink(lr)} <small>${ago(lr.created_at)}</small>` : ''}</td>
      <td>${j.next_fire_times ? html`${when(j.next_fire_times[0])} <small>${ago(j.next_fire_times[0])}</small>` : ''}</td></tr>`;
  });
  return table(['Job', 'Namespace', 'Queue', 'Schedule', 'State', 'Last run', 'Next fire'], rows, 'No jobs match.');
}

async function jobLive(ctx) {
  const id = ctx.params[0];
  const [j, runs] = await Promise.all([api(`/v1/jobs/${enc(id)}`), api(`/v1/runs?job=${enc(id)}&limit=100`)]);
  const hist = runs.items.slice().reverse().map(r => ({id: r.id, status: r.status, seconds: runSeconds(r)}));
  const def = {...j};
  for (const k of ['id', 'created_at', 'updated_at', 'next_fire_times', 'next_fire_times_local', 'last_run']) delete def[k];
  const tz = j.schedule?.timezone || 'UTC';
  return page(html`Job ${j.name} ${j.enabled ? '' : html`<span class="state s-paused">paused</span>`}`, html`
    <p class="actions">
      ${op(html`<button data-act="triggerJob" data-id="${j.id}">Trigger now</button>
      ${j.enabled ? html`<button data-act="pauseJob" data-id="${j.id}">Pause</button>` : html`<button data-act="resumeJob" data-id="${j.id}">Resume</button>`}
      <button data-act="cancelJob" data-id="${j.id}" class="danger" data-confirm="Cancel every active run of this job?">Cancel active runs</button>`)}
      ${j.dag ? html`<a href="/ui/dags/${enc(j.dag.id)}">DAG entry ${j.dag.entry}</a>` : ''}
    </p>
    <div class="grid">
    ${card('Definition', html`<pre class="code">${pretty(def)}</pre>`)}
    ${card('Next fire times', j.next_fire_times ? table(['Local (' + tz + ')', 'UTC'], j.next_fire_times.map((t, i) => html`<tr>
        <td class="mono">${fmtZoned(j.next_fire_times_local[i])}</td><td class="mono">${new Date(t).toISOString().replace('.000Z', 'Z')}</td></tr>`))
      : html`<p class="muted">${j.schedule ? 'The job is paused.' : 'No schedule: it runs when triggered.'}</p>`)}
    ${card(html`Run history <small>(latest ${runs.items.length}, durations)</small>`, html`${hist.length ? durations(hist) : ''}
      ${table(['Run', 'State', 'Trigger', 'Created', 'Duration', 'Attempt'], runs.items.slice(0, 20).map(r => html`<tr>
        <td>${runLink(r)}</td><td>${state(r.status)}</td><td>${r.trigger}</td><td>${ago(r.created_at)}</td>
        <td>${dur(runSeconds(r))}</td><td>${r.attempt}/${r.max_attempts}</td></tr>`), 'No runs yet.')}`, 'wide')}
    </div>`);
}

// fmtZoned shows a time as the server wrote it (in the schedule's zone, with its offset).
const fmtZoned = s => s.replace('T', ' ').replace(/(\.\d+)?([+-]\d\d:\d\d|Z)$/, ' $2');

// ---- runs ----

function runsMount(ctx) {
  const q = ctx.query;
  return page('Runs', html`<form class="filters" data-form="filterRuns">
    <select name="status"><option value="">any status</option>${runStates.map(s => html`<option ${q.get('status') === s ? raw('selected') : ''}>${s}</option>`)}</select>
    <input name="queue" placeholder="queue" value="${q.get('queue') || ''}">
    <input name="job" placeholder="job id or name" value="${q.get('job') || ''}">
    <input name="worker" placeholder="worker" value="${q.get('worker') || ''}">
    <input name="namespace" placeholder="namespace" value="${q.get('namespace') || ''}">
    <button>Filter</button></form>`);
}

async function runsLive(ctx) {
  const q = ctx.query;
  const p = {};
  for (const k of ['status', 'queue', 'job', 'worker', 'namespace', 'cursor']) p[k] = q.get(k);
  const runs = await api('/v1/runs' + qs({...p, limit: 100}));
  const rows = runs.items.map(r => html`<tr data-run="${r.id}"><td>${runLink(r)}</td><td>${jobLink(r.job_id, r.job_name)}</td>
    <td>${state(r.status)}${r.cancel_requested && r.status === 'running' ? html` <small>stopping</small>` : ''}</td><td>${r.queue}</td><td>${r.namespace}</td>
    <td>${r.worker_id || ''}</td><td>${ago(r.created_at)}</td><td>${dur(runSeconds(r))}</td>
    <td class="why">${r.pending_reason || r.error || ''}</td></tr>`);
  const next = runs.next_cursor ? html`<p><a href="/ui/runs${qs({...p, cursor: runs.next_cursor})}">Older runs →</a></p>` : '';
  return html`${table(['Run', 'Job', 'State', 'Queue', 'Namespace', 'Worker', 'Created', 'Duration', 'Why'], rows, 'No runs match.')}${next}`;
}

function runMount(ctx) {
  return html`<div id="run-head"></div><div id="live-run"></div>
    <section class="card wide"><h2>Logs <small id="log-state"></small></h2><pre id="logs" class="logs"></pre></section>`;
}

// The run page streams the log of the run's latest attempt; a new attempt (a retry)
// starts a new stream.
function runStart(ctx) {
  ctx.state.attempt = 0;
}

function followLogs(ctx, attempt) {
  if (ctx.state.logAbort) ctx.state.logAbort.abort();
  const abort = new AbortController();
  ctx.signal.addEventListener('abort', () => abort.abort());
  ctx.state.logAbort = abort;
  const pre = document.getElementById('logs');
  const st = document.getElementById('log-state');
  pre.textContent = '';
  st.textContent = `attempt ${attempt}, following`;
  pre.dataset.streaming = 'true';
  streamLogs(ctx.params[0], attempt, text => {
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(text);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }, abort.signal).then(() => {
    if (abort.signal.aborted) return;
    st.textContent = `attempt ${attempt}, ended`;
    pre.dataset.streaming = 'false';
  }).catch(e => {
    if (e.name !== 'AbortError') st.textContent = `attempt ${attempt}: ${e.message}`;
  });
}

async function runLive(ctx) {
  const r = await api(`/v1/runs/${enc(ctx.params[0])}`);
  const attempt = Math.max(r.attempt, 1);
  if (r.status !== 'waiting' && r.status !== 'scheduled' && r.status !== 'queued' || r.attempt > 0) {
    if (ctx.state.attempt !== attempt) { ctx.state.attempt = attempt; followLogs(ctx, attempt); }
  } else if (!ctx.state.attempt) {
    document.getElementById('log-state').textContent = 'no attempt yet';
  }
  const canCancel = !['succeeded', 'failed', 'cancelled', 'skipped'].includes(r.status);
  const canRetry = r.status === 'failed' || r.status === 'cancelled';
  const job = await api(`/v1/jobs/${enc(r.job_id)}`).catch(() => null);
  return html`<h1>Run <span class="mono">${r.id}</span> ${state(r.status)}</h1>
    <p class="actions">
      ${op(html`${canCancel ? html`<button data-act="cancelRun" data-id="${r.id}" class="danger">Cancel</button>` : ''}
      ${canRetry ? html`<button data-act="retryRun" data-id="${r.id}">Retry</button>` : ''}`)}
      of job ${jobLink(r.job_id, r.job_name)} · queue <a href="/ui/runs?queue=${enc(r.queue)}">${r.queue}</a> · ${r.namespace}
      ${job?.dag ? html` · <a href="/ui/dags/${enc(job.dag.id)}">DAG entry ${job.dag.entry}</a>` : ''}
    </p>
    ${r.pending_reason ? html`<p class="pending" data-pending="${r.pending_code}">Pending: ${r.pending_reason}</p>` : ''}
    ${r.cancel_requested && !['cancelled', 'failed', 'succeeded'].includes(r.status) ? html`<p class="pending">Cancel requested: the worker is stopping it.</p>` : ''}
    ${r.error ? html`<p class="error">${r.error}</p>` : ''}
    <div class="grid">
    ${card('Details', html`<dl>
      <dt>Trigger</dt><dd>${r.trigger}</dd><dt>Created</dt><dd>${when(r.created_at)}</dd>
      <dt>Due</dt><dd>${when(r.scheduled_for)}</dd>${r.instant ? html`<dt>Cron instant</dt><dd>${when(r.instant)}</dd>` : ''}
      <dt>Attempt</dt><dd>${r.attempt} of ${r.max_attempts}${r.disruptions ? ` (+${r.disruptions} disrupted)` : ''}</dd>
      <dt>Priority</dt><dd>${r.priority}</dd><dt>Worker</dt><dd>${r.worker_id || '—'}</dd>
      ${r.depends_on ? html`<dt>Depends on</dt><dd>${r.depends_on.map(d => html`${runLink({id: d.run})} <small>on ${d.condition}</small> `)}</dd>` : ''}
      ${r.args ? html`<dt>Args</dt><dd><code>${JSON.stringify(r.args)}</code></dd>` : ''}
    </dl>`)}
    ${card('Timeline', timeline(r))}
    ${card('Attempts', table(['#', 'Worker', 'State', 'Exit', 'Started', 'Took', 'Error'], (r.attempts || []).map(a => html`<tr>
      <td>${a.n}</td><td>${a.worker_id}</td><td>${state(a.status)}</td><td>${a.exit_code ?? ''}</td><td>${when(a.started_at)}</td>
      <td>${dur(((a.finished_at ? new Date(a.finished_at) : Date.now()) - new Date(a.started_at)) / 1000)}</td><td class="why">${a.error || ''}</td></tr>`), 'No attempt yet.'), 'wide')}
    </div>`;
}

// ---- pipelines and DAGs ----

async function pipelinesLive() {
  const l = await api('/v1/pipelines');
  return page('Pipelines', table(['Pipeline', 'Namespace', 'Steps', 'Schedule', 'Next fire'], l.items.map(p => html`<tr>
    <td><a href="/ui/pipelines/${enc(p.name)}${p.namespace !== 'default' ? '?namespace=' + enc(p.namespace) : ''}">${p.name}</a></td><td>${p.namespace}</td><td>${p.steps.length}</td>
    <td class="mono">${p.schedule ? p.schedule.cron || p.schedule.every || '' : ''}</td><td>${p.next_fire_at ? ago(p.next_fire_at) : ''}</td></tr>`), 'No pipelines.'));
}

async function pipelineLive(ctx) {
  const name = ctx.params[0];
  const nsq = ctx.query.get('namespace') ? '?namespace=' + enc(ctx.query.get('namespace')) : '';
  const [p, runs] = await Promise.all([api(`/v1/pipelines/${enc(name)}${nsq}`),
    api(`/v1/pipelines/${enc(name)}/runs${nsq ? nsq + '&' : '?'}limit=20`)]);
  const sel = runs.items.find(r => r.id === ctx.query.get('run')) || runs.items[0];
  const edges = [];
  for (const s of p.steps) for (const d of s.depends_on || []) edges.push({from: d.ref, to: s.name, condition: d.condition});
  const nodes = p.steps.map(s => {
    const r = sel?.steps[s.name];
    return {name: s.name, status: r?.status || 'none', href: r ? `/ui/runs/${r.id}` : `/ui/jobs/${s.job_id}`,
      sub: r ? `${r.status}${r.started_at ? ' · ' + dur(runSeconds(r)) : ''}` : 'not run'};
  });
  const link = r => `/ui/pipelines/${enc(name)}${qs({namespace: ctx.query.get('namespace'), run: r.id})}`;
  return page(html`Pipeline ${p.name}`, html`
    <p class="actions">${op(html`<button data-act="triggerPipeline" data-name="${p.name}" data-ns="${p.namespace}">Trigger now</button>
      ${sel && sel.status === 'running' ? html`<button data-act="cancelPipelineRun" data-name="${p.name}" data-ns="${p.namespace}" data-id="${sel.id}" class="danger">Cancel this run</button>` : ''}
      ${sel && (sel.status === 'failed' || sel.status === 'cancelled') ? html`<button data-act="retryPipelineRun" data-name="${p.name}" data-ns="${p.namespace}" data-id="${sel.id}">Retry failed steps</button>` : ''}`)}
      ${p.schedule ? html`schedule <code>${p.schedule.cron || p.schedule.every}</code>` : 'no schedule'}${p.next_fire_at ? html` · next ${ago(p.next_fire_at)}` : ''}</p>
    ${card(sel ? html`Run <span class="mono">${shortID(sel.id)}</span> ${state(sel.status)} <small>${sel.trigger}, ${ago(sel.created_at)}</small>` : 'Steps (not run yet)',
      graph(nodes, edges), 'wide')}
    ${card('Runs', table(['Run', 'State', 'Trigger', 'Created'], runs.items.map(r => html`<tr class="${r === sel ? 'sel' : ''}">
      <td><a href="${link(r)}" class="mono">${shortID(r.id)}</a></td><td>${state(r.status)}</td><td>${r.trigger}</td><td>${ago(r.created_at)}</td></tr>`), 'No runs yet.'), 'wide')}`);
}

async function dagsLive() {
  const l = await api('/v1/dags?limit=100');
  return page('DAGs', html`${table(['DAG', 'Namespace', 'Entries', 'Created'], l.items.map(d => html`<tr>
    <td><a href="/ui/dags/${enc(d.id)}" class="mono">${d.id}</a></td><td>${d.namespace}</td><td>${d.entries}</td><td>${ago(d.created_at)}</td></tr>`),
    'No DAGs (POST /v1/dags creates one).')}`);
}

async function dagLive(ctx) {
  const d = await api(`/v1/dags/${enc(ctx.params[0])}`);
  const edges = [];
  for (const e of d.entries) for (const dep of e.depends_on || []) if (dep.ref) edges.push({from: dep.ref, to: e.name, condition: dep.condition});
  const nodes = d.entries.map(e => ({name: e.name, status: e.run.status, href: `/ui/runs/${e.run.id}`,
    sub: `${e.run.status}${e.run.started_at ? ' · ' + dur(runSeconds(e.run)) : ''}`}));
  return page(html`DAG <span class="mono">${d.id}</span> ${state(d.status)}`, html`
    <p>${d.namespace} · created ${ago(d.created_at)} · ${d.entries.length} entries</p>
    ${card('Graph', graph(nodes, edges), 'wide')}
    ${card('Entries', table(['Entry', 'Run', 'State', 'Depends on', 'Why'], d.entries.map(e => html`<tr>
      <td>${e.name}</td><td>${runLink(e.run)}</td><td>${state(e.run.status)}</td>
      <td>${(e.depends_on || []).map(dep => html`${dep.ref || runLink({id: dep.run})} <small>(${dep.condition})</small> `)}</td>
      <td class="why">${e.run.pending_reason || e.run.error || ''}</td></tr>`)), 'wide')}`);
}

// ---- workers, queues, dead letters, audit ----

async function workersLive() {
  const l = await api('/v1/workers');
  const cap = (used, total, unit = '') => total ? html`<meter min="0" max="${total}" value="${used}"></meter> ${used}/${total}${unit}` : '—';
  return page('Workers', table(['Worker', 'State', 'Slots', 'CPU', 'Memory', 'GPU', 'Running', 'Labels', 'Last heartbeat', ''], l.items.map(w => html`<tr data-worker="${w.id}">
    <td><a href="/ui/runs?worker=${enc(w.id)}">${w.id}</a></td><td>${state(w.state)}</td><td>${cap(w.used.slots, w.capacity.slots)}</td>
    <td>${cap(w.used.cpu, w.capacity.cpu)}</td><td>${cap(w.used.memory_mb, w.capacity.memory_mb, ' MB')}</td><td>${cap(w.used.gpu, w.capacity.gpu)}</td>
    <td>${w.running}</td><td class="mono">${Object.entries(w.labels || {}).map(([k, v]) => `${k}=${v}`).join(' ')}</td><td>${ago(w.last_heartbeat)}</td>
    <td>${w.state === 'active' ? op(html`<button data-act="drainWorker" data-id="${w.id}" data-confirm="Drain ${w.id}? It finishes what it runs and exits.">Drain</button>`) : ''}</td></tr>`), 'No workers.'));
}

async function queuesLive() {
  const l = await api('/v1/queues');
  return page('Queues', table(['Queue', 'State', 'Waiting', 'Scheduled', 'Queued', 'Running', 'Max concurrency', 'Priority', 'Rate limit', ''], l.items.map(q => html`<tr data-queue="${q.name}">
    <td><a href="/ui/runs?queue=${enc(q.name)}">${q.name}</a></td><td>${q.paused ? html`<span class="state s-paused">paused</span>` : html`<span class="state s-active">active</span>`}</td>
    <td>${q.depth.waiting || 0}</td><td>${q.depth.scheduled || 0}</td><td>${q.depth.queued || 0}</td>
    <td>${q.max_concurrency ? html`<meter min="0" max="${q.max_concurrency}" value="${q.depth.running || 0}"></meter> ` : ''}${q.depth.running || 0}</td>
    <td>${q.max_concurrency || 'no limit'}</td><td>${q.priority}</td><td>${q.rate_limit ? `${q.rate_limit.rate} per ${q.rate_limit.per}` : ''}</td>
    <td>${op(q.paused ? html`<button data-act="resumeQueue" data-name="${q.name}">Resume</button>` : html`<button data-act="pauseQueue" data-name="${q.name}">Pause</button>`)}</td></tr>`), 'No queues.'));
}

async function deadLive(ctx) {
  const l = await api('/v1/runs?status=failed&limit=200');
  const sel = ctx.state.selected ||= new Set();
  for (const id of sel) if (!l.items.some(r => r.id === id)) sel.delete(id);
  return page('Dead letters', html`<p class="muted">Failed runs with their last error, newest first.</p>
    ${op(html`<p class="actions"><button data-act="retrySelected" ${sel.size ? '' : raw('disabled')}>Retry selected (${sel.size})</button></p>`)}
    ${table([op(html`<input type="checkbox" data-all>`), 'Run', 'Job', 'Queue', 'Failed', 'Attempts', 'Last error', ''], l.items.map(r => html`<tr data-run="${r.id}">
      <td>${op(html`<input type="checkbox" data-sel="${r.id}" ${sel.has(r.id) ? raw('checked') : ''}>`)}</td>
      <td>${runLink(r)}</td><td>${jobLink(r.job_id, r.job_name)}</td><td>${r.queue}</td><td>${ago(r.finished_at)}</td><td>${r.attempt}/${r.max_attempts}</td>
      <td class="why">${r.error || ''}</td><td>${op(html`<button data-act="retryRun" data-id="${r.id}">Retry</button>`)}</td></tr>`), 'No failed runs.')}`);
}

function deadAfter(ctx, el) {
  el.onchange = ev => {
    const t = ev.target;
    const sel = ctx.state.selected;
    if (t.dataset.sel) { if (t.checked) sel.add(t.dataset.sel); else sel.delete(t.dataset.sel); }
    if (t.dataset.all !== undefined) {
      for (const c of el.querySelectorAll('input[data-sel]')) { c.checked = t.checked; if (t.checked) sel.add(c.dataset.sel); else sel.delete(c.dataset.sel); }
    }
    const b = el.querySelector('[data-act=retrySelected]');
    if (b) { b.disabled = !sel.size; b.textContent = `Retry selected (${sel.size})`; }
  };
}

async function auditLive() {
  const l = await optional('/v1/audit');
  if (l === null) return page('Audit', html`<p class="muted">This server keeps no audit log.</p>`);
  return page('Audit', table(['When', 'Who', 'Action', 'Target', 'Before', 'After'], (l.entries || []).map(e => html`<tr data-audit="${e.id}">
    <td>${when(e.at)}</td><td>${e.actor}${e.role ? html` <small>(${e.role})</small>` : ''}</td><td>${e.action}</td><td class="mono">${auditTarget(e.target)}</td>
    <td><code>${e.before === undefined || e.before === null ? '' : JSON.stringify(e.before)}</code></td>
    <td><code>${e.after === undefined || e.after === null ? '' : JSON.stringify(e.after)}</code></td></tr>`), 'No entries.'));
}

// auditTarget links an audit entry's target ("job:<id>", "run:<id>", "queue:<name>") to its page.
function auditTarget(target) {
  const [kind, id] = [target.slice(0, target.indexOf(':')), target.slice(target.indexOf(':') + 1)];
  const page = {job: `/ui/jobs/${enc(id)}`, run: `/ui/runs/${enc(id)}`, queue: `/ui/runs?queue=${enc(id)}`}[kind];
  return page && id ? html`<a href="${page}">${target}</a>` : target;
}

function loginMount(ctx) {
  return html`<section class="card login"><h1>Sign in to stint</h1>
    <p>This server needs an API token. Paste one (<code>stint tokens create</code> makes them); it is kept in this tab only.</p>
    <form data-form="login"><input type="password" name="token" placeholder="stint_…" autocomplete="off" autofocus required>
    <input type="hidden" name="next" value="${ctx.query.get('next') || ''}"><button>Sign in</button><p class="form-error error"></p></form></section>`;
}

// ---- routes and actions ----

const live = f => ({live: f});
export const routes = [
  [/^\/$/, {title: () => 'Overview', ...live(overview)}],
  [/^\/login$/, {title: () => 'Sign in', mount: loginMount, poll: false}],
  [/^\/jobs$/, {title: () => 'Jobs', mount: jobsMount, live: jobsLive}],
  [/^\/jobs\/([^/]+)$/, {title: c => 'Job ' + c.params[0], live: jobLive}],
  [/^\/runs$/, {title: () => 'Runs', mount: runsMount, live: runsLive}],
  [/^\/runs\/([^/]+)$/, {title: c => 'Run ' + shortID(c.params[0]), mount: runMount, start: runStart, live: runLive, after: (c, el) => {
    // the run's header and cards sit above the log, which is never redrawn
    const slot = document.getElementById('live-run');
    slot.replaceChildren(...el.childNodes);
  }}],
  [/^\/pipelines$/, {title: () => 'Pipelines', ...live(pipelinesLive)}],
  [/^\/pipelines\/([^/]+)$/, {title: c => 'Pipeline ' + c.params[0], live: pipelineLive}],
  [/^\/dags$/, {title: () => 'DAGs', ...live(dagsLive)}],
  [/^\/dags\/([^/]+)$/, {title: c => 'DAG ' + shortID(c.params[0]), live: dagLive}],
  [/^\/workers$/, {title: () => 'Workers', ...live(workersLive)}],
  [/^\/queues$/, {title: () => 'Queues', ...live(queuesLive)}],
  [/^\/dead$/, {title: () => 'Dead letters', live: deadLive, after: deadAfter}],
  [/^\/audit$/, {title: () => 'Audit', ...live(auditLive)}],
];
routes.notFound = {title: () => 'Not found', live: async () => page('Not found', html`<p>No page here. <a href="/ui/">Overview</a></p>`), poll: false};

const post = (path, body) => api(path, {method: 'POST', body});
const nsq = ns => ns && ns !== 'default' ? '?namespace=' + enc(ns) : '';

export const actions = {
  async triggerJob(d) { const r = await post(`/v1/jobs/${enc(d.id)}/trigger`); app.navigate(`/ui/runs/${r.run.id}`); return 'Triggered'; },
  async pauseJob(d) { await post(`/v1/jobs/${enc(d.id)}/pause`); return 'Paused'; },
  async resumeJob(d) { await post(`/v1/jobs/${enc(d.id)}/resume`); return 'Resumed'; },
  async cancelJob(d) { await post(`/v1/jobs/${enc(d.id)}/cancel`); return 'Cancelled its active runs'; },
  async cancelRun(d) { const r = await post(`/v1/runs/${enc(d.id)}/cancel`); return r.run.status === 'cancelled' ? 'Cancelled' : 'Cancel requested'; },
  async retryRun(d) { await post(`/v1/runs/${enc(d.id)}/retry`); return 'Queued again'; },
  async retrySelected(d, ctx) {
    const ids = [...ctx.state.selected];
    const res = await Promise.allSettled(ids.map(id => post(`/v1/runs/${enc(id)}/retry`)));
    ctx.state.selected.clear();
    const bad = res.filter(r => r.status === 'rejected');
    if (bad.length) throw new Error(`${ids.length - bad.length} queued again; ${bad.length} failed: ${bad[0].reason.message}`);
    return `${ids.length} queued again`;
  },
  async triggerPipeline(d) { await post(`/v1/pipelines/${enc(d.name)}/trigger${nsq(d.ns)}`); app.navigate(`/ui/pipelines/${enc(d.name)}${nsq(d.ns)}`, true); return 'Triggered'; },
  async cancelPipelineRun(d) { await post(`/v1/pipelines/${enc(d.name)}/runs/${enc(d.id)}/cancel${nsq(d.ns)}`); return 'Cancelled'; },
  async retryPipelineRun(d) { await post(`/v1/pipelines/${enc(d.name)}/runs/${enc(d.id)}/retry${nsq(d.ns)}`); return 'Retrying'; },
  async drainWorker(d) { await post(`/v1/workers/${enc(d.id)}/drain`); return 'Draining'; },
  async pauseQueue(d) { await api(`/v1/queues/${enc(d.name)}`, {method: 'PATCH', body: {paused: true}}); return `Queue ${d.name} paused`; },
  async resumeQueue(d) { await api(`/v1/queues/${enc(d.name)}`, {method: 'PATCH', body: {paused: false}}); return `Queue ${d.name} resumed`; },
  async filterJobs(f) { app.navigate('/ui/jobs' + qs(f)); },
  async filterRuns(f) { app.navigate('/ui/runs' + qs(f)); },
  async login(f) { await login(f.token.trim(), f.next); },
};
