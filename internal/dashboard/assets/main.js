// allot dashboard: logs in with a bearer token, keeps nodes,
// NodeResourceSlices, ResourceClaims (v1alpha2 and v1), v1 ResourceSlices
// and pods current through the API server's list and watch, draws them,
// and asks the dashboard's explain endpoint why pending pods are pending.
// No framework, no build step, nothing from another origin.
import { Feed, Unauthorized, api } from './feeds.js';
import { pendingPods, render } from './view.js';

const TOKEN_KEY = 'allot.dashboard.token';
const EXPLAIN_URL = 'api/explain'; // relative to the page, /dashboard/
const RENDER_DELAY_MS = 50;        // batches a burst of watch events
const EXPLAIN_SETTLE_MS = 200;     // lets a burst of changes settle first
const EXPLAIN_INTERVAL_MS = 5000;  // at most one explanation per interval

// Claims of the two versions are one set, each stored in the version it
// was written in and readable through the other as a view: each feed
// selects the claims stored in its own version, so that every claim is
// drawn once, from the version it was written in.
const STORED_VERSION = 'resource.allot.dev/stored-version';
const storedIn = (v) => '?fieldSelector=' + encodeURIComponent(STORED_VERSION + '=resource.k8s.io/' + v);

const FEEDS = {
  nodes: '/api/v1/nodes',
  slices: '/apis/resource.k8s.io/v1alpha2/noderesourceslices',
  claims: '/apis/resource.k8s.io/v1alpha2/resourceclaims' + storedIn('v1alpha2'),
  slicesV1: '/apis/resource.k8s.io/v1/resourceslices',
  claimsV1: '/apis/resource.k8s.io/v1/resourceclaims' + storedIn('v1'),
  pods: '/api/v1/pods',
};

const $ = (id) => document.getElementById(id);

// ---- session ----

let token = '';
let session = null; // AbortController of the running session

const state = {
  feeds: {},
  explanations: new Map(), // "ns/name" -> PodExplanation
  explainError: '',
  explainedAt: null,
  reset() {
    this.feeds = {};
    this.explanations = new Map();
    this.explainError = '';
    this.explainedAt = null;
  },
  items(name) {
    const f = this.feeds[name];
    return f ? [...f.items.values()] : [];
  },
};

// takeTokenFromURL moves a token from the URL fragment (form-encoded, as
// `allot up` prints it) to sessionStorage, and out of the address bar and
// the history entry.
function takeTokenFromURL() {
  const t = new URLSearchParams(location.hash.slice(1)).get('token');
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  history.replaceState(null, '', location.pathname + location.search);
}

function showLogin(message) {
  if (session) session.abort();
  session = null;
  token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  $('app').hidden = true;
  $('logout').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  setConn('idle', 'not connected');
  $('token-input').focus();
}

function unauthorized() {
  showLogin('The API server did not accept the token (401). Log in again.');
}

function start(t) {
  token = t;
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  session = new AbortController();
  state.reset();
  const hooks = { changed, status: updateConn, unauthorized };
  for (const [name, path] of Object.entries(FEEDS)) {
    const feed = new Feed(name, path, token, hooks);
    state.feeds[name] = feed;
    feed.run(session.signal);
  }
  scheduleRender();
}

function setConn(s, text) {
  const c = $('conn');
  c.dataset.state = s;
  c.textContent = text;
}

function updateConn() {
  const feeds = Object.values(state.feeds);
  const failed = feeds.filter((f) => f.error);
  if (failed.length) {
    setConn('error', 'reconnecting: ' + failed.map((f) => f.name + ': ' + f.error).join('; '));
  } else if (feeds.length && feeds.every((f) => f.watching)) {
    setConn('live', 'live');
  } else {
    setConn('connecting', 'connecting…');
  }
}

// ---- redrawing ----

let renderTimer = 0;

function changed() {
  scheduleRender();
  scheduleExplain();
}

function scheduleRender() {
  if (renderTimer) return;
  renderTimer = setTimeout(() => {
    renderTimer = 0;
    if (session) render(state);
  }, RENDER_DELAY_MS);
}

// ---- explanations ----

let explainTimer = 0;
let explainBusy = false;
let explainAgain = false;
let explainStarted = 0;

// scheduleExplain asks for explanations once changes settle, and not
// sooner than EXPLAIN_INTERVAL_MS after the previous request: each one
// lists the whole cluster.
function scheduleExplain() {
  if (explainBusy) { explainAgain = true; return; }
  if (explainTimer) return;
  const wait = Math.max(EXPLAIN_SETTLE_MS, explainStarted + EXPLAIN_INTERVAL_MS - Date.now());
  explainTimer = setTimeout(explain, wait);
}

async function explain() {
  explainTimer = 0;
  if (!session) return;
  explainStarted = Date.now();
  if (pendingPods(state.items('pods')).length === 0) {
    state.explanations = new Map();
    return;
  }
  const signal = session.signal;
  explainBusy = true;
  explainAgain = false;
  try {
    const resp = await api(EXPLAIN_URL, token, signal);
    const body = await resp.json();
    state.explanations = new Map(body.pods.map((p) => [p.namespace + '/' + p.name, p]));
    state.explainError = body.truncated ? 'Only the first ' + body.pods.length + ' pending pods are explained.' : '';
    state.explainedAt = new Date();
  } catch (e) {
    if (signal.aborted) return;
    if (e instanceof Unauthorized) { unauthorized(); return; }
    state.explainError = 'Explaining failed: ' + (e.message || String(e));
  } finally {
    explainBusy = false;
  }
  scheduleRender();
  if (explainAgain) scheduleExplain();
}

// ---- boot ----

$('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = $('token-input').value.trim();
  if (!t) return;
  $('token-input').value = '';
  sessionStorage.setItem(TOKEN_KEY, t);
  start(t);
});
$('logout').addEventListener('click', () => showLogin(''));
takeTokenFromURL();
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) start(saved); else showLogin('');
