// The UI's shell: who the user is, the client-side router that gives every page its
// stable address under /ui/, the polling that keeps the visible page live, and the buttons.

import {api, html, setToken, token, onUnauthorized, esc} from './lib.js';
import {routes, actions} from './pages.js';

const main = document.getElementById('main');
const who = document.getElementById('who');
const toastEl = document.getElementById('toast');

// pollEvery is how often the visible page asks the API again.
const pollEvery = 2000;

// ctx is the current page's context; navigating ends it (its signal aborts streams).
let ctx = null;

export const app = {me: null, navigate, refresh, toast};

function toast(msg, bad = false) {
  toastEl.textContent = msg;
  toastEl.className = bad ? 'bad' : '';
  toastEl.hidden = false;
  clearTimeout(toast.t);
  toast.t = setTimeout(() => { toastEl.hidden = true; }, 4000);
}

function match(path) {
  for (const [re, page] of routes) {
    const m = path.match(re);
    if (m) return {page, params: (m.slice(1)).map(decodeURIComponent)};
  }
  return null;
}

function navigate(url, replace = false) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  show();
}

async function whoami() {
  try {
    app.me = await api('/v1/whoami');
  } catch (e) {
    app.me = null;
    if (e.status !== 401) throw e;
  }
  who.replaceChildren();
  if (app.me) {
    const role = app.me.open ? 'open (no token needed)' : `${app.me.name} · ${app.me.role}`;
    who.innerHTML = html`<span class="role" data-role="${app.me.role}">${role}</span>${app.me.open ? '' : html` <button class="link" data-act="logout">log out</button>`}`;
  }
}

async function show() {
  if (ctx) ctx.abort.abort();
  clearTimeout(show.timer);
  const url = new URL(location.href);
  let path = url.pathname.replace(/^\/ui/, '') || '/';
  if (!app.me && path !== '/login') {
    navigate('/ui/login?next=' + encodeURIComponent(url.pathname + url.search), true);
    return;
  }
  const m = match(path) || {page: routes.notFound, params: []};
  const abort = new AbortController();
  ctx = {params: m.params, query: url.searchParams, signal: abort.signal, abort, page: m.page, state: {}};
  for (const a of document.querySelectorAll('#nav a')) {
    const href = a.getAttribute('href').replace(/^\/ui/, '') || '/';
    a.classList.toggle('on', href === '/' ? path === '/' : path.startsWith(href));
  }
  document.title = (m.page.title ? m.page.title(ctx) + ' · ' : '') + 'stint';
  main.innerHTML = html`${m.page.mount ? m.page.mount(ctx) : ''}<div id="live"></div>`;
  if (m.page.start) m.page.start(ctx, main);
  await refresh(ctx);
}

// refresh draws the page's live part again and schedules the next poll.
async function refresh(c = ctx) {
  if (!c || c !== ctx || !c.page.live) return;
  clearTimeout(show.timer);
  const live = document.getElementById('live');
  try {
    const out = await c.page.live(c);
    if (c !== ctx) return;
    live.innerHTML = out;
    live.dataset.loaded = 'true';
    if (c.page.after) c.page.after(c, live);
  } catch (e) {
    if (c !== ctx || e.name === 'AbortError') return;
    if (e.status === 401) return;
    live.innerHTML = html`<p class="error">${e.message}</p>`;
  }
  if (c.page.poll !== false) show.timer = setTimeout(() => refresh(c), pollEvery);
}

document.addEventListener('click', async ev => {
  const a = ev.target.closest('a');
  if (a && a.getAttribute('href')?.startsWith('/ui/') && !a.target && !ev.ctrlKey && !ev.metaKey && !ev.shiftKey && ev.button === 0) {
    ev.preventDefault();
    navigate(a.getAttribute('href'));
    return;
  }
  const b = ev.target.closest('button[data-act]');
  if (!b) return;
  ev.preventDefault();
  const act = b.dataset.act;
  if (act === 'logout') {
    setToken('');
    app.me = null;
    who.replaceChildren();
    navigate('/ui/login');
    return;
  }
  const f = actions[act];
  if (!f) return;
  if (b.dataset.confirm && !confirm(b.dataset.confirm)) return;
  b.disabled = true;
  try {
    const msg = await f(b.dataset, ctx);
    if (msg) toast(msg);
  } catch (e) {
    toast(e.message, true);
  } finally {
    b.disabled = false;
  }
  refresh();
});

document.addEventListener('submit', async ev => {
  const form = ev.target;
  const f = form.dataset.form && actions[form.dataset.form];
  if (!f) return;
  ev.preventDefault();
  try {
    const msg = await f(Object.fromEntries(new FormData(form)), ctx);
    if (msg) toast(msg);
  } catch (e) {
    const out = form.querySelector('.form-error');
    if (out) out.textContent = e.message; else toast(e.message, true);
  }
});

addEventListener('popstate', show);
onUnauthorized(() => {
  if (location.pathname.startsWith('/ui/login')) return;
  app.me = null;
  navigate('/ui/login?next=' + encodeURIComponent(location.pathname + location.search), true);
});

// login is called by the login form: keep the token for this tab and go where the user was going.
export async function login(t, next) {
  setToken(t);
  await whoami();
  if (!app.me) {
    setToken('');
    throw new Error('the server does not accept this token');
  }
  navigate(next && next.startsWith('/ui/') && !next.startsWith('/ui/login') ? next : '/ui/', true);
}

(async () => {
  try {
    await whoami();
  } catch (e) {
    main.innerHTML = html`<p class="error">Cannot reach the server: ${e.message}</p>`;
    return;
  }
  if (app.me && location.pathname.startsWith('/ui/login')) {
    navigate(new URL(location.href).searchParams.get('next') || '/ui/', true);
    return;
  }
  show();
})();

export {esc, token};
