// Feeds: lists and watches of the API, with the user's bearer token.

const RETRY_MIN_MS = 500;   // first retry after an error; doubles per failure
const RETRY_MAX_MS = 10000;

/** Unauthorized: the API server refused the token (401). */
export class Unauthorized extends Error {}
class Gone extends Error {}

/** keyOf is "namespace/name", or "name" for cluster-scoped objects. */
export const keyOf = (o) => (o.metadata.namespace ? o.metadata.namespace + '/' : '') + o.metadata.name;

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

/**
 * api GETs path on the page's origin with the token. It throws
 * Unauthorized on 401 and an Error with the Status message on other
 * failures.
 */
export async function api(path, token, signal) {
  const resp = await fetch(path, {
    headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
    cache: 'no-store', signal,
  });
  if (resp.status === 401) throw new Unauthorized();
  if (!resp.ok) {
    let msg = resp.status + ' ' + resp.statusText;
    try { msg = (await resp.json()).message || msg; } catch (e) { /* not a Status */ }
    throw new Error(msg);
  }
  return resp;
}

/**
 * Feed keeps one kind's objects current: List, then Watch from the list's
 * resourceVersion; a stream that ends is resumed from the last version
 * seen; 410 Gone or an error starts over with a List. hooks.changed() is
 * called after each change that matters, hooks.status() when watching or
 * error change, hooks.unauthorized() on 401 (the feed then stops).
 */
export class Feed {
  constructor(name, path, token, hooks) {
    this.name = name;
    this.path = path;
    this.token = token;
    this.hooks = hooks;
    this.items = new Map();
    this.watching = false;
    this.error = '';
  }

  async run(signal) {
    let delay = RETRY_MIN_MS;
    while (!signal.aborted) {
      try {
        let rv = await this.list(signal);
        delay = RETRY_MIN_MS;
        for (;;) {
          const began = Date.now();
          rv = await this.watch(rv, signal);
          // A stream the server ends at once is not resumed in a tight loop.
          if (Date.now() - began < RETRY_MIN_MS) await sleep(RETRY_MIN_MS, signal);
          if (signal.aborted) return;
        }
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof Unauthorized) { this.hooks.unauthorized(); return; }
        this.watching = false;
        this.error = e instanceof Gone ? '' : (e.message || String(e));
        this.hooks.status();
        if (!(e instanceof Gone)) {
          await sleep(delay, signal);
          delay = Math.min(delay * 2, RETRY_MAX_MS);
        }
      }
    }
  }

  async list(signal) {
    const resp = await api(this.path, this.token, signal);
    const list = await resp.json();
    this.items = new Map((list.items || []).map((o) => [keyOf(o), o]));
    this.hooks.changed();
    return list.metadata.resourceVersion;
  }

  // watch follows one stream and returns the last resourceVersion seen
  // when the server ends it.
  async watch(rv, signal) {
    const q = (this.path.includes('?') ? '&' : '?') +
      'watch=1&allowWatchBookmarks=true&resourceVersion=' + encodeURIComponent(rv);
    const resp = await api(this.path + q, this.token, signal);
    this.watching = true;
    this.error = '';
    this.hooks.status();
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return rv;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) rv = this.apply(JSON.parse(line), rv);
      }
    }
  }

  apply(ev, rv) {
    const o = ev.object || {};
    switch (ev.type) {
      case 'ADDED':
        this.items.set(keyOf(o), o);
        break;
      case 'MODIFIED': {
        const old = this.items.get(keyOf(o));
        this.items.set(keyOf(o), o);
        if (this.name === 'nodes' && old && withoutHeartbeat(old) === withoutHeartbeat(o)) {
          return o.metadata.resourceVersion;
        }
        break;
      }
      case 'DELETED':
        this.items.delete(keyOf(o));
        break;
      case 'BOOKMARK':
        return o.metadata.resourceVersion;
      case 'ERROR':
        if (o.code === 410) throw new Gone(o.message);
        throw new Error(o.message || 'watch error');
      default:
        return rv;
    }
    this.hooks.changed();
    return o.metadata.resourceVersion;
  }
}

// withoutHeartbeat is a node as JSON without what every heartbeat
// changes, so that a heartbeat neither redraws the page nor asks for
// explanations again.
function withoutHeartbeat(n) {
  return JSON.stringify({
    ...n,
    metadata: { ...n.metadata, resourceVersion: '', managedFields: null },
    status: { ...n.status, conditions: (n.status?.conditions || []).map((c) => ({ ...c, lastHeartbeatTime: '' })) },
  });
}
