// View: draws nodes, devices and pending pods from the watched objects.
// Text is always set as text, never parsed as HTML.
import { keyOf } from './feeds.js';

const $ = (id) => document.getElementById(id);
const byName = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

// el builds an element: attrs set attributes (data-*, class, ...) and
// children are nodes or strings (always text, never HTML). A boolean
// data-* attribute reads "true" or "false"; other attributes are present
// when true and absent when false.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (typeof v === 'boolean' && k.startsWith('data-')) e.setAttribute(k, String(v));
    else if (v === true) e.setAttribute(k, '');
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

/** pendingPods are the pods that wait for a node, by namespace and name. */
export function pendingPods(pods) {
  return pods
    .filter((p) => !p.spec.nodeName && !p.metadata.deletionTimestamp &&
      p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed')
    .sort((a, b) => byName(keyOf(a), keyOf(b)));
}

// allocations indexes structured allocations: "node\ndriver" -> Map of
// instance ID -> [claim]. v1 claims' results on seed devices (pool = node,
// device = instance ID with "/" written "--") are added to it; their
// results on published v1 pools go to v1Held.
function allocations(claims, v1Claims, v1PoolKeys) {
  const out = new Map();
  const add = (k, id, c) => {
    if (!out.has(k)) out.set(k, new Map());
    const m = out.get(k);
    if (!m.has(id)) m.set(id, []);
    m.get(id).push(c);
  };
  for (const c of v1Claims) {
    for (const r of c.status?.allocation?.devices?.results || []) {
      if (v1PoolKeys.has(r.driver + '\n' + r.pool)) continue;
      add(r.pool + '\n' + r.driver, seedInstanceID(r.device), c);
    }
  }
  for (const c of claims) {
    for (const h of c.status?.allocation?.resourceHandles || []) {
      const sd = h.structuredData;
      if (!sd?.partitionable) continue;
      const k = sd.nodeName + '\n' + h.driverName;
      if (!out.has(k)) out.set(k, new Map());
      const m = out.get(k);
      for (const inst of sd.partitionable.instances || []) {
        if (!m.has(inst.id)) m.set(inst.id, []);
        m.get(inst.id).push(c);
      }
    }
  }
  return out;
}

// Extended resources are device-plugin resources: a domain-prefixed
// name outside kubernetes.io.
function isExtended(name) {
  const slash = name.indexOf('/');
  if (slash < 0 || name.startsWith('requests.')) return false;
  const domain = name.slice(0, slash);
  return domain !== 'kubernetes.io' && !domain.endsWith('.kubernetes.io');
}

const SUFFIX = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

function parseQuantity(q) {
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(String(q ?? '').trim());
  if (!m) return 0;
  return Number(m[1]) * (m[2] ? SUFFIX[m[2]] ?? 0 : 1);
}

// podAmount is what a pod holds of an extended resource: the larger of
// its containers' sum and its largest init container.
function podAmount(pod, res) {
  const amount = (c) => parseQuantity(c.resources?.limits?.[res] ?? c.resources?.requests?.[res] ?? 0);
  const sum = (pod.spec.containers || []).reduce((s, c) => s + amount(c), 0);
  const init = Math.max(0, ...(pod.spec.initContainers || []).map(amount));
  return Math.max(sum, init);
}

function conditionStatus(obj, type) {
  return (obj?.status?.conditions || []).find((c) => c.type === type);
}

// ---- rendering ----

/**
 * render redraws the page from model: items(kind) lists the objects of
 * "nodes", "slices" (NodeResourceSlices), "claims" (v1alpha2
 * ResourceClaims), "slicesV1" (resource.k8s.io/v1 ResourceSlices),
 * "claimsV1" (v1 ResourceClaims) and "pods"; explanations maps "ns/name" to
 * the explain endpoint's answer for that pod; explainError and explainedAt
 * say how the last explanation went.
 */
export function render(model) {
  const pools = v1Pools(model.items('slicesV1'));
  const v1Claims = model.items('claimsV1');
  const allocs = allocations(model.items('claims'), v1Claims, new Set(pools.keys()));
  const held = v1Held(v1Claims);
  const reports = unhealthyReports(model.items('pods'));
  const counts = newCounts();
  const nodes = new Map(model.items('nodes').map((n) => [n.metadata.name, n]));
  const poolsByNode = new Map();
  const shared = [];
  for (const p of [...pools.values()].sort((a, b) => byName(a.driver + '\n' + a.name, b.driver + '\n' + b.name))) {
    if (!p.node) { shared.push(p); continue; }
    if (!poolsByNode.has(p.node)) poolsByNode.set(p.node, []);
    poolsByNode.get(p.node).push(p);
  }
  const slicesByNode = new Map();
  for (const s of model.items('slices')) {
    const n = s.spec.nodeName;
    if (!slicesByNode.has(n)) slicesByNode.set(n, []);
    slicesByNode.get(n).push(s);
  }
  const allocNodes = [...allocs.keys()].map((k) => k.split('\n')[0]);
  const names = [...new Set([...nodes.keys(), ...slicesByNode.keys(), ...allocNodes, ...poolsByNode.keys()])].sort(byName);
  const podsByNode = new Map();
  for (const p of model.items('pods')) {
    if (!p.spec.nodeName || p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') continue;
    if (!podsByNode.has(p.spec.nodeName)) podsByNode.set(p.spec.nodeName, []);
    podsByNode.get(p.spec.nodeName).push(p);
  }
  const cards = names.map((name) => nodeCard(name, nodes.get(name), slicesByNode.get(name) || [],
    allocs, podsByNode.get(name) || [], counts, (poolsByNode.get(name) || []).map((p) => poolSection(p, held, reports, counts))));
  $('nodes').replaceChildren(...(cards.length ? cards : [el('p', { class: 'empty' }, 'No nodes.')]));
  const sharedSections = shared.map((p) => poolSection(p, held, reports, counts));
  $('pools-section').hidden = sharedSections.length === 0;
  $('pools').replaceChildren(...sharedSections);

  const pending = pendingPods(model.items('pods'));
  renderSummary(names.length, counts, pending.length);
  $('pending').replaceChildren(...(pending.length ? pending.map((p) => pendingCard(p, model.explanations.get(keyOf(p))))
    : [el('p', { class: 'empty' }, 'No pending pods.')]));
  const at = model.explainedAt ? 'Explained at ' + model.explainedAt.toLocaleTimeString() + '. ' : '';
  $('explain-status').textContent = pending.length ? at + model.explainError : '';
}

// Counts are of like things: devices (the instances a slice publishes at
// its top level) by their state, which add up to the devices; and the
// partitions held by claims. Free partitions are not counted: the
// partition groups of a device are alternatives, so their free cells do
// not add up to anything one could allocate at once.
function newCounts() {
  return { devices: 0, free: 0, held: 0, partitioned: 0, unhealthy: 0, partitionsHeld: 0 };
}

// plural picks a noun's form for a count: 1 node, 2 nodes.
function plural(n, one, many) {
  return n === 1 ? one : many;
}

function renderSummary(nodeCount, c, pending) {
  const item = (n, label, s) => el('span', { 'data-summary': s }, el('strong', {}, n), ' ' + label);
  $('summary').replaceChildren(
    item(nodeCount, plural(nodeCount, 'node', 'nodes'), 'nodes'),
    el('span', { 'data-summary-group': 'devices' },
      item(c.devices, plural(c.devices, 'device:', 'devices:'), 'devices'), ' ',
      item(c.free, 'free', 'free'), ' · ', item(c.held, 'held', 'held'), ' · ',
      item(c.partitioned, 'partitioned', 'partitioned'), ' · ', item(c.unhealthy, 'unhealthy', 'unhealthy')),
    item(c.partitionsHeld, plural(c.partitionsHeld, 'partition held', 'partitions held'), 'partitions-held'),
    item(pending, plural(pending, 'pending pod', 'pending pods'), 'pending'));
}

function nodeCard(name, node, slices, allocs, pods, counts, poolSections) {
  const card = el('section', { class: 'node', 'data-node': name, 'aria-label': 'node ' + name });
  const header = el('header', {}, el('h3', {}, name));
  if (!node) {
    header.append(el('span', { class: 'badge bad' }, 'no Node object'));
  } else {
    const ready = conditionStatus(node, 'Ready');
    const ok = ready?.status === 'True';
    header.append(el('span', { class: 'badge ' + (ok ? 'ok' : 'bad'), 'data-ready': ok },
      ok ? 'Ready' : 'Not ready' + (ready?.reason ? ' (' + ready.reason + ')' : '')));
    if (node.spec?.unschedulable) header.append(el('span', { class: 'badge bad' }, 'unschedulable'));
    header.append(el('span', { class: 'note' }, pods.length + ' pods'));
  }
  card.append(header);
  const ext = extendedTable(node, pods);
  if (ext) card.append(ext);

  const drivers = new Map();
  for (const s of slices) {
    if (!drivers.has(s.spec.driverName)) drivers.set(s.spec.driverName, []);
    drivers.get(s.spec.driverName).push(s);
  }
  for (const k of allocs.keys()) {
    const [n, d] = k.split('\n');
    if (n === name && !drivers.has(d)) drivers.set(d, []);
  }
  for (const d of [...drivers.keys()].sort(byName)) {
    card.append(driverSection(d, drivers.get(d), allocs.get(name + '\n' + d) || new Map(), counts));
  }
  card.append(...poolSections);
  if (!ext && drivers.size === 0 && poolSections.length === 0) card.append(el('p', { class: 'empty' }, 'No devices published.'));
  return card;
}

function extendedTable(node, pods) {
  const cap = node?.status?.capacity || {};
  const alloc = node?.status?.allocatable || {};
  const names = [...new Set([...Object.keys(cap), ...Object.keys(alloc)])].filter(isExtended).sort(byName);
  if (!names.length) return null;
  const rows = names.map((res) => {
    const users = pods.filter((p) => podAmount(p, res) > 0);
    const used = users.reduce((s, p) => s + podAmount(p, res), 0);
    return el('tr', { 'data-resource': res },
      el('td', {}, el('code', {}, res)), el('td', {}, cap[res] ?? '-'), el('td', {}, alloc[res] ?? '-'),
      el('td', { 'data-used': used }, String(used)),
      el('td', {}, users.map((p) => keyOf(p)).join(', ') || '-'));
  });
  return el('table', { class: 'ext', 'aria-label': 'device-plugin resources' },
    el('caption', { class: 'note' }, 'Device-plugin resources'),
    el('thead', {}, el('tr', {}, ['resource', 'capacity', 'allocatable', 'used', 'pods'].map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

function driverSection(driver, slices, allocs, counts) {
  const local = newCounts();
  const seen = new Set();
  const ctx = { allocs, seen, counts: local, unhealthy: false, blocked: false, root: true };
  const roots = slices.slice().sort((a, b) => byName(a.metadata.name, b.metadata.name))
    .flatMap((s) => s.spec.partitionable?.resourceInstances || []);
  local.devices = roots.length;
  const grid = el('ul', { class: 'grid', 'aria-label': driver + ' devices' },
    roots.map((inst) => instanceItem(inst, inst.name, ctx)));
  for (const k of Object.keys(local)) counts[k] += local[k];
  const section = el('div', { class: 'driver', 'data-driver': driver },
    el('h4', {}, driver, ' ',
      el('span', { class: 'note', 'data-driver-summary': driver },
        `${local.devices} ${plural(local.devices, 'device', 'devices')}: ${local.free} free · ${local.held} held · ` +
        `${local.partitioned} partitioned · ${local.unhealthy} unhealthy; ` +
        `${local.partitionsHeld} ${plural(local.partitionsHeld, 'partition', 'partitions')} held ` +
        `(slices: ${slices.map((s) => s.metadata.name).join(', ') || 'none'})`)),
    grid);
  const orphans = [...allocs.keys()].filter((id) => !seen.has(id)).sort(byName);
  if (orphans.length) {
    section.append(el('p', { class: 'error', 'data-orphans': orphans.join(' ') },
      'Allocated but not published by the driver: ',
      orphans.map((id) => id + ' (' + allocs.get(id).map(keyOf).join(', ') + ')').join('; ')));
  }
  return section;
}

const unhealthyInst = (inst) => !!inst.health && inst.health !== 'Healthy';

// instanceItem draws one instance; partitionable ones contain one row per
// partition group. ctx carries what ancestors imply: unhealthy (an
// ancestor is) and blocked (an ancestor is partitioned another way).
function instanceItem(inst, id, ctx) {
  ctx.seen.add(id);
  const holders = ctx.allocs.get(id);
  const unhealthy = ctx.unhealthy || unhealthyInst(inst);
  const groups = inst.partitions || [];
  const heldUnder = (prefix) => [...ctx.allocs.keys()].some((k) => k.startsWith(prefix + '/'));
  const active = groups.filter((g) => heldUnder(id + '/' + g.name));
  const leaf = groups.length === 0;

  let st;
  let label;
  if (holders) {
    st = 'held';
    label = unhealthy ? 'held, unhealthy' : 'held';
  } else if (unhealthy) {
    st = 'unhealthy';
    label = 'unhealthy';
  } else if (active.length) {
    st = 'partitioned';
    label = 'partitioned: ' + active.map((g) => g.name).join(', ');
  } else if (ctx.blocked) {
    st = 'unavailable';
    label = 'unavailable';
  } else {
    st = 'free';
    label = leaf ? 'free' : 'free, whole';
  }
  if (ctx.root) ctx.counts[st] += 1; // a device: free, held, partitioned or unhealthy
  else if (holders) ctx.counts.partitionsHeld += 1;

  const item = el('li', {
    class: 'inst', 'data-instance': id, 'data-state': st,
    'data-kind': ctx.root ? (leaf ? 'device' : 'partitionable') : (leaf ? 'partition' : 'partitionable'),
    'data-health': unhealthy ? 'unhealthy' : 'healthy',
    'aria-label': id + ': ' + label,
  }, el('span', { class: 'inst-name' }, inst.name), el('span', { class: 'inst-state' }, label));
  for (const c of holders || []) item.append(...holderSpans(c));
  for (const g of groups) {
    const gid = id + '/' + g.name;
    const isActive = active.includes(g);
    const child = {
      ...ctx, root: false, unhealthy,
      blocked: ctx.blocked || (active.length > 0 && !isActive),
    };
    item.append(el('div', { class: 'group', 'data-group': gid, 'data-active': isActive },
      el('span', { class: 'group-name' }, 'partition ' + g.name + (isActive ? ' (in use)' : '')),
      el('ul', { class: 'grid' }, (g.resourceInstances || []).map((ri) => instanceItem(ri, gid + '/' + ri.name, child)))));
  }
  return item;
}

// ---- resource.k8s.io/v1 ----

// seedInstanceID is the seed instance ID of a v1 device name: the pool of
// a seed device is its node, its name the instance ID with "/" written
// "--" (resourceconv.SeedInstanceID).
const seedInstanceID = (device) => device.split('--').join('/');

/**
 * v1Pools groups ResourceSlices into pools ("driver\npool" -> pool): the
 * slices of the newest generation, in name order; node is set when every
 * one of them is local to that one node (spec.nodeName); incomplete when
 * fewer slices than resourceSliceCount are known.
 */
export function v1Pools(slices) {
  const byKey = new Map();
  for (const s of slices) {
    const k = s.spec.driver + '\n' + s.spec.pool.name;
    if (!byKey.has(k)) byKey.set(k, []);
    byKey.get(k).push(s);
  }
  const out = new Map();
  for (const [k, all] of byKey) {
    const gen = Math.max(...all.map((s) => Number(s.spec.pool.generation || 0)));
    const cur = all.filter((s) => Number(s.spec.pool.generation || 0) === gen)
      .sort((a, b) => byName(a.metadata.name, b.metadata.name));
    const nodes = new Set(cur.map((s) => s.spec.nodeName || ''));
    const node = nodes.size === 1 ? [...nodes][0] : '';
    const want = Math.max(...cur.map((s) => Number(s.spec.pool.resourceSliceCount || 0)));
    const counters = new Map(); // set -> Map counter -> total
    for (const s of cur) {
      for (const cs of s.spec.sharedCounters || []) {
        if (!counters.has(cs.name)) counters.set(cs.name, new Map());
        for (const [n, c] of Object.entries(cs.counters || {})) counters.get(cs.name).set(n, parseQuantity(c.value));
      }
    }
    out.set(k, {
      driver: cur[0].spec.driver, name: cur[0].spec.pool.name, generation: gen, node,
      where: node ? 'node ' + node : whereText(cur),
      slices: cur.map((s) => s.metadata.name),
      incomplete: cur.length < want ? `${cur.length} of ${want} slices` : '',
      devices: cur.flatMap((s) => s.spec.devices || []),
      counters,
    });
  }
  return out;
}

// whereText says where a pool that is not local to one node is available.
function whereText(slices) {
  const w = new Set(slices.filter((s) => !(s.spec.sharedCounters && !(s.spec.devices || []).length)).map((s) => {
    if (s.spec.nodeName) return 'node ' + s.spec.nodeName;
    if (s.spec.allNodes) return 'all nodes';
    if (s.spec.nodeSelector) return 'selected nodes';
    if (s.spec.perDeviceNodeSelection) return 'per device';
    return 'no node';
  }));
  return [...w].sort(byName).join(', ') || 'no devices';
}

// v1Held indexes v1 claims' allocated devices: "driver\npool\ndevice" ->
// [claim].
function v1Held(claims) {
  const out = new Map();
  for (const c of claims) {
    for (const r of c.status?.allocation?.devices?.results || []) {
      const k = r.driver + '\n' + r.pool + '\n' + r.device;
      if (!out.has(k)) out.set(k, []);
      if (!out.get(k).includes(c)) out.get(k).push(c);
    }
  }
  return out;
}

// unhealthyReports indexes what the node agent reports of the devices of
// v1 pools that pods hold: the "DRIVER/POOL/DEVICE" resources of the
// "claim:..." entries of the pods' container statuses'
// allocatedResourcesStatus whose health is Unhealthy, each under
// "uid:UID\nID" and "pod:NAMESPACE/NAME\nID" (Unknown and Healthy report
// nothing).
function unhealthyReports(pods) {
  const out = new Set();
  for (const p of pods) {
    const st = p.status || {};
    for (const cs of [...(st.initContainerStatuses || []), ...(st.containerStatuses || [])]) {
      for (const rs of cs.allocatedResourcesStatus || []) {
        if (!String(rs.name || '').startsWith('claim:')) continue;
        for (const r of rs.resources || []) {
          if (r.health !== 'Unhealthy' || !r.resourceID) continue;
          if (p.metadata.uid) out.add('uid:' + p.metadata.uid + '\n' + r.resourceID);
          out.add('pod:' + keyOf(p) + '\n' + r.resourceID);
        }
      }
    }
  }
  return out;
}

// reportedUnhealthy lists the pods that claims (the holders of one
// device) are reserved for and whose status reports the device
// (resourceID "DRIVER/POOL/DEVICE") Unhealthy. A reservation with a UID
// matches only that pod, so that a deleted and recreated pod of the same
// name, or one that held the device before, does not speak for the
// holder.
function reportedUnhealthy(claims, resourceID, reports) {
  const out = [];
  for (const c of claims) {
    for (const r of c.status?.reservedFor || []) {
      if (r.resource && r.resource !== 'pods') continue;
      const pod = c.metadata.namespace + '/' + r.name;
      const k = r.uid ? 'uid:' + r.uid : 'pod:' + pod;
      if (reports.has(k + '\n' + resourceID) && !out.includes(pod)) out.push(pod);
    }
  }
  return out;
}

// deviceStatus judges what the drivers of the claims holding one device
// wrote of it in their status.devices (matched by driver, pool, device
// and share), as `allot explain` does: 'failing' (a binding failure
// condition of the allocation is True, or Ready is False), 'binding' (a
// binding condition of the allocation is not True yet), 'ready' (Ready is
// True) or '' (nothing said). Of several holders the worst counts. text
// lists the conditions, for the device's tooltip.
const STATUS_RANK = { '': 0, ready: 1, binding: 2, failing: 3 };
function deviceStatus(claims, driver, pool, device) {
  let state = '';
  const text = [];
  for (const c of claims) {
    for (const r of c.status?.allocation?.devices?.results || []) {
      if (r.driver !== driver || r.pool !== pool || r.device !== device) continue;
      const st = (c.status.devices || []).find((d) => d.driver === driver && d.pool === pool &&
        d.device === device && (d.shareID || '') === (r.shareID || ''));
      const conds = st?.conditions || [];
      const cond = (t) => conds.find((x) => x.type === t);
      let s = '';
      if ((r.bindingFailureConditions || []).some((f) => cond(f)?.status === 'True') || cond('Ready')?.status === 'False') {
        s = 'failing';
      } else if ((r.bindingConditions || []).some((b) => cond(b)?.status !== 'True')) {
        s = 'binding';
      } else if (cond('Ready')?.status === 'True') {
        s = 'ready';
      }
      if (STATUS_RANK[s] > STATUS_RANK[state]) state = s;
      for (const x of conds) text.push(keyOf(c) + ': ' + x.type + '=' + x.status + (x.reason ? ' (' + x.reason + ')' : ''));
    }
  }
  return { state, text };
}

// blockingTaint is the first taint that keeps new claims off a device.
const blockingTaint = (d) => (d.taints || []).find((t) => t.effect === 'NoSchedule' || t.effect === 'NoExecute');

// consumption lists a device's counter demands as [set, counter, amount].
const consumption = (d) => (d.consumesCounters || []).flatMap((cc) =>
  Object.entries(cc.counters || {}).map(([n, c]) => [cc.counterSet, n, parseQuantity(c.value)]));

// poolSection draws one v1 pool: its devices, held by which claims, and
// its shared counters with how much of them allocated devices consume.
// Its devices count like seed devices: free, held, partitioned (devices
// that share counters are partitions of one; a free device whose counters
// the held ones have used up is partitioned) or unhealthy (a NoSchedule
// or NoExecute taint). A held device is held whatever its health, as a
// seed instance is; its data-health is unhealthy when it is tainted or a
// pod it is reserved for reports it Unhealthy (reports, from
// unhealthyReports).
function poolSection(pool, held, reports, counts) {
  const local = newCounts();
  const key = pool.driver + '\n' + pool.name + '\n';
  const used = new Map(); // "set\ncounter" -> amount allocated devices consume
  for (const d of pool.devices) {
    if (!held.has(key + d.name)) continue;
    for (const [set, n, q] of consumption(d)) used.set(set + '\n' + n, (used.get(set + '\n' + n) || 0) + q);
  }
  const left = (set, n) => (pool.counters.get(set)?.get(n) ?? 0) - (used.get(set + '\n' + n) || 0);
  const items = pool.devices.map((d) => {
    const holders = held.get(key + d.name);
    const taint = blockingTaint(d);
    const reporters = holders ? reportedUnhealthy(holders, pool.driver + '/' + pool.name + '/' + d.name, reports) : [];
    const status = holders ? deviceStatus(holders, pool.driver, pool.name, d.name) : { state: '', text: [] };
    const failing = status.state === 'failing';
    const short = consumption(d).filter(([set, n, q]) => q > left(set, n)).map(([set]) => set);
    let st;
    let label;
    if (holders) {
      st = 'held';
      label = 'held' + (taint ? ', tainted' : '') + (reporters.length ? ', unhealthy' : '') +
        (failing || status.state === 'binding' ? ', ' + status.state : '');
    } else if (taint) {
      st = 'unhealthy';
      label = 'tainted ' + taint.key + (taint.value ? '=' + taint.value : '') + ':' + taint.effect;
    } else if (short.length) {
      st = 'partitioned';
      label = 'partitioned: counters ' + [...new Set(short)].join(', ') + ' in use';
    } else {
      st = 'free';
      label = 'free';
    }
    local.devices += 1;
    local[st] += 1;
    const item = el('li', {
      class: 'inst', 'data-device': d.name, 'data-state': st,
      'data-health': taint || reporters.length || failing ? 'unhealthy' : 'healthy', 'aria-label': d.name + ': ' + label,
      'data-reported-unhealthy-by': reporters.length ? reporters.join(' ') : undefined,
      'data-device-status': status.state || undefined,
      title: [reporters.length ? 'reported Unhealthy in the status of pod ' + reporters.join(', ') : '',
        ...status.text].filter(Boolean).join('\n') || undefined,
    }, el('span', { class: 'inst-name' }, d.name), el('span', { class: 'inst-state' }, label));
    for (const c of holders || []) item.append(...holderSpans(c));
    return item;
  });
  for (const k of Object.keys(local)) counts[k] += local[k];
  const section = el('div', { class: 'driver pool', 'data-pool': pool.name, 'data-pool-driver': pool.driver },
    el('h4', {}, pool.driver, ' · pool ', pool.name, ' ',
      el('span', { class: 'note', 'data-pool-summary': pool.name },
        `${local.devices} ${plural(local.devices, 'device', 'devices')}: ${local.free} free · ${local.held} held · ` +
        `${local.partitioned} partitioned · ${local.unhealthy} unhealthy ` +
        `(${pool.node ? '' : pool.where + '; '}generation ${pool.generation}; slices: ${pool.slices.join(', ')})`)),
    el('ul', { class: 'grid', 'aria-label': pool.driver + ' pool ' + pool.name + ' devices' }, items));
  if (pool.incomplete) {
    section.append(el('p', { class: 'error', 'data-incomplete': true }, 'Incomplete pool: ' + pool.incomplete + ' known.'));
  }
  if (pool.counters.size) {
    const rows = [];
    for (const set of [...pool.counters.keys()].sort(byName)) {
      for (const [n, total] of [...pool.counters.get(set)].sort((a, b) => byName(a[0], b[0]))) {
        const u = used.get(set + '\n' + n) || 0;
        rows.push(el('tr', { 'data-counter': set + '/' + n, 'data-used': formatQuantity(u), 'data-total': formatQuantity(total) },
          el('td', {}, el('code', {}, set)), el('td', {}, n), el('td', {}, formatQuantity(u)), el('td', {}, formatQuantity(total))));
      }
    }
    section.append(el('table', { class: 'ext', 'aria-label': 'shared counters of pool ' + pool.name },
      el('caption', { class: 'note' }, 'Shared counters'),
      el('thead', {}, el('tr', {}, ['counter set', 'counter', 'allocated', 'total'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows)));
  }
  const published = new Set(pool.devices.map((d) => d.name));
  const orphans = [...held.keys()].filter((k) => k.startsWith(key) && !published.has(k.slice(key.length))).sort(byName);
  if (orphans.length) {
    section.append(el('p', { class: 'error', 'data-orphans': orphans.map((k) => k.slice(key.length)).join(' ') },
      'Allocated but not published in the pool: ',
      orphans.map((k) => k.slice(key.length) + ' (' + held.get(k).map(keyOf).join(', ') + ')').join('; ')));
  }
  return section;
}

// holderSpans name the claim holding a device and the pods it is
// reserved for.
function holderSpans(c) {
  const pods = (c.status?.reservedFor || []).map((r) => c.metadata.namespace + '/' + r.name);
  return [el('span', { class: 'holder', 'data-claim': keyOf(c) }, 'claim ' + keyOf(c)),
    el('span', { class: 'holder', 'data-pods': pods.join(' ') },
      pods.length ? 'pod ' + pods.join(', ') : 'not reserved for a pod')];
}

// formatQuantity writes a number as a Kubernetes quantity: with the
// largest binary suffix that divides it, else as a plain number.
function formatQuantity(n) {
  for (const s of ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki']) {
    if (n !== 0 && n % SUFFIX[s] === 0) return n / SUFFIX[s] + s;
  }
  return String(Math.round(n * 1000) / 1000);
}

function pendingCard(pod, ex) {
  const key = keyOf(pod);
  const card = el('article', { class: 'pending-pod', 'data-pod': key, 'data-explained': !!ex },
    el('h3', {}, key));
  const wants = [];
  for (const rc of pod.spec.resourceClaims || []) {
    wants.push('claim ' + (rc.resourceClaimName || 'from template ' + rc.resourceClaimTemplateName));
  }
  const ext = new Set();
  for (const c of [...(pod.spec.containers || []), ...(pod.spec.initContainers || [])]) {
    for (const r of Object.keys({ ...c.resources?.limits, ...c.resources?.requests })) if (isExtended(r)) ext.add(r);
  }
  for (const r of [...ext].sort(byName)) wants.push(r + ' × ' + podAmount(pod, r));
  if (wants.length) card.append(el('p', { class: 'note' }, 'Wants: ' + wants.join(', ')));

  if (!ex) {
    const cond = conditionStatus(pod, 'PodScheduled');
    card.append(el('p', { class: 'verdict' }, cond?.message ? 'Scheduler: ' + cond.message : 'Waiting for an explanation…'));
    return card;
  }
  card.append(el('p', { class: 'verdict', 'data-verdict': ex.verdict }, el('strong', {}, ex.verdict), ': ' + ex.message));
  const rows = [];
  if (ex.preFilter) {
    rows.push(reasonRow('(all nodes)', ex.preFilter.code, ex.preFilter.plugin, ex.preFilter.message));
  }
  for (const n of ex.nodes || []) {
    if (n.feasible) {
      rows.push(reasonRow(n.node, n.node === ex.selected ? 'Selected' : 'Feasible', '-', 'score ' + (n.score || 0)));
      continue;
    }
    for (const r of n.rejections || []) rows.push(reasonRow(n.node, r.code, r.plugin, r.message));
  }
  if (rows.length) {
    card.append(el('table', { class: 'reasons', 'aria-label': 'why ' + key + ' is pending, per node' },
      el('thead', {}, el('tr', {}, ['node', 'result', 'plugin', 'reason'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows)));
  }
  if (ex.devices?.length) {
    // Devices already allocated to the pod's claims (it may wait for
    // their binding conditions), with what their drivers report.
    card.append(el('ul', { class: 'note', 'aria-label': 'devices of ' + key },
      ex.devices.map((d) => el('li', { 'data-pod-device': d.driver + '/' + d.pool + '/' + d.device, 'data-device-status': d.state },
        'claim ' + d.claim + ': ' + d.driver + '/' + d.pool + '/' + d.device + ' ' + d.state + (d.why ? ' (' + d.why + ')' : '')))));
  }
  return card;
}

function reasonRow(node, code, plugin, message) {
  return el('tr', { 'data-reason-node': node },
    el('td', {}, node), el('td', {}, code), el('td', {}, plugin), el('td', {}, message));
}
