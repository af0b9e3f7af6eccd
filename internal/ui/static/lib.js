// Helpers every page uses: calling the API with the user's token, building HTML safely,
// and formatting times, durations and states.

const tokenKey = 'stint.token';

export function token() { return sessionStorage.getItem(tokenKey) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(tokenKey, t); else sessionStorage.removeItem(tokenKey);
}

// ApiError is a failed call: its HTTP status and the problem document's words.
export class ApiError extends Error {
  constructor(status, problem) {
    const fields = (problem.errors || []).map(e => `${e.field}: ${e.message}`).join('; ');
    super(problem.detail ? problem.detail + (fields ? ` (${fields})` : '') : problem.title || `HTTP ${status}`);
    this.status = status;
  }
}

// unauthorized is set by the app: what to do when a call answers 401 (go to the login page).
let unauthorized = () => {};
export function onUnauthorized(f) { unauthorized = f; }

// api calls the REST API: the parsed JSON answer (null for 204), or an ApiError.
export async function api(path, {method = 'GET', body, signal} = {}) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, {method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body)});
  if (r.status === 204) return null;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = {detail: text}; }
  if (!r.ok) {
    if (r.status === 401) unauthorized();
    throw new ApiError(r.status, data || {});
  }
  return data;
}

// optional calls a route that a server may not have (alerts, audit): null when it answers 404.
export async function optional(path) {
  try { return await api(path); } catch (e) { if (e.status === 404) return null; throw e; }
}

// streamLogs follows a run's log, calling onText with each piece as it arrives; it ends
// when the attempt has ended (the server closes the stream) or signal aborts.
export async function streamLogs(runID, attempt, onText, signal) {
  const headers = {};
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  const q = new URLSearchParams({follow: 'true'});
  if (attempt) q.set('attempt', attempt);
  const r = await fetch(`/v1/runs/${encodeURIComponent(runID)}/logs?${q}`, {headers, signal});
  if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => ({})));
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    onText(dec.decode(value, {stream: true}));
  }
}

// Raw marks markup that html`` must not escape.
class Raw { constructor(s) { this.s = s; } toString() { return this.s; } }
export const raw = s => new Raw(s);

const escapes = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'};
export const esc = s => String(s ?? '').replace(/[&<>"']/g, c => escapes[c]);

function part(v) {
  if (v instanceof Raw) return v.s;
  if (Array.isArray(v)) return v.map(part).join('');
  if (v === false || v === null || v === undefined) return '';
  return esc(v);
}

// html is a template tag: interpolated values are escaped, except html`` results and
// arrays of them.
export function html(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => { out += part(v) + strings[i + 1]; });
  return new Raw(out);
}

export const enc = encodeURIComponent;

export function ago(t, now = Date.now()) {
  if (!t) return '';
  const s = (now - new Date(t).getTime()) / 1000;
  if (s < 0) return 'in ' + dur(-s);
  return dur(s) + ' ago';
}

// dur words a length of time given in seconds: 850ms, 42s, 3m10s, 2h5m, 3d4h.
export function dur(s) {
  if (s === null || s === undefined || isNaN(s)) return '';
  if (s < 1) return Math.round(s * 1000) + 'ms';
  if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${Math.round(s % 60)}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${m % 60}m`;
  return `${Math.floor(h / 24)}d${h % 24}h`;
}

// runSeconds is how long a run took (or has taken so far), from its first start.
export function runSeconds(r, now = Date.now()) {
  if (!r.started_at) return null;
  const end = r.finished_at ? new Date(r.finished_at).getTime() : now;
  return (end - new Date(r.started_at).getTime()) / 1000;
}

export function when(t) {
  if (!t) return '';
  const d = new Date(t);
  return html`<time datetime="${d.toISOString()}" title="${d.toISOString()}">${d.toLocaleString()}</time>`;
}

export const state = s => html`<span class="state s-${s}">${s}</span>`;

export const shortID = id => (id || '').slice(-8);

export function runLink(r) { return html`<a href="/ui/runs/${enc(r.id)}" class="mono">${shortID(r.id)}</a>`; }
export function jobLink(id, name) { return html`<a href="/ui/jobs/${enc(id)}">${name || shortID(id)}</a>`; }

// The states a run can be in, in the order the UI lists them.
export const runStates = ['waiting', 'scheduled', 'queued', 'running', 'succeeded', 'failed', 'cancelled', 'skipped'];
