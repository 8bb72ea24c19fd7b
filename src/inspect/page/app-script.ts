/**
 * Browser code: connects to /live, applies the server's page messages to a model, and redraws what
 * changed at most every 40 ms. Sessions are grouped by their Mcp-Session-Id: the client's machine
 * (session region beside its streams, the transport region) and the server's machine for the same id.
 * Every element is built with textContent, never innerHTML: what the machines saw is data, not markup.
 * Written without template literals: it lives inside one.
 */
export const APP_SCRIPT = `
var actors = new Map();
var groups = new Map();
var feeds = new Map();
var figureTables = new Map();
var dirty = new Set();
var pendingRows = [];
var t0 = null;
var timer = null;
var socket = null;
var relayQueue = [];
var markers = [];
var pendingModern = new Map();
var badgesDirty = false;
var ENDED_STREAM_MS = 5000;
/* Replaying a trace (mcp-continuity replay --open): no live feed; the scrubber asks for each instant. */
var scrubbing = null;
var scrubSeq = 0;
var MAX_MARKERS = 2000;

function $(id) { return document.getElementById(id); }
function when(ms) {
  if (t0 === null) t0 = ms;
  return ((ms - t0) / 1000).toFixed(3) + 's';
}
function short(id) { return typeof id === 'string' && id.length > 14 ? id.slice(0, 10) + '…' : String(id); }

function schedule() {
  if (timer === null) timer = setTimeout(function () { timer = null; render(); }, 40);
}

function resetAll() {
  actors.forEach(function (a) { if (a.removeTimer) clearTimeout(a.removeTimer); });
  actors.clear();
  groups.clear();
  feeds.clear();
  figureTables.clear();
  dirty.clear();
  pendingRows = [];
  markers = [];
  pendingModern.clear();
  // A trace's times already count from its start.
  t0 = scrubbing ? 0 : null;
  var sessions = $('sessions');
  while (sessions.lastChild && sessions.lastChild.id !== 'empty') sessions.removeChild(sessions.lastChild);
  $('marker-list').textContent = '';
  $('timeline-list').textContent = '';
  $('figure-tables').textContent = '';
  renderFeeds();
  renderCounts();
}

function apply(m) {
  var a;
  switch (m.kind) {
    case 'reset': resetAll(); break;
    case 'feed': feeds.set(m.feed, m); renderFeeds(); break;
    case 'actor': upsertActor(m); break;
    case 'snapshot':
      a = actors.get(m.id);
      if (a) { a.snapshot = m.snapshot; dirty.add(a.id); }
      break;
    case 'window':
      a = actors.get(m.id);
      if (a) { a.windows.set(m.window.stream, m.window); dirty.add(a.id); }
      break;
    case 'timeline': pendingRows.push(m.entry); break;
    case 'marker': addMarker(m.marker, m.text); break;
    case 'figures': setFigures(m); break;
    case 'modern':
      a = actors.get(m.id);
      if (a) { a.modern = m.view; dirty.add(a.id); } else pendingModern.set(m.id, m.view);
      break;
  }
}

/* ---- actors ---- */

function upsertActor(m) {
  var view = actors.get(m.id);
  if (view) {
    view.snapshot = m.snapshot;
    dirty.add(view.id);
    return;
  }
  var isClient = m.machine === 'client';
  var nested = m.machine === 'stream';
  view = {
    id: m.id, machine: m.machine, parentId: m.parentId, rootId: m.rootId, snapshot: m.snapshot,
    windows: new Map(), drawn: buildChart(m.chart, nested), removeTimer: null, streamsEl: null, cursorsEl: null,
    modern: pendingModern.get(m.id),
  };
  pendingModern.delete(m.id);
  view.nameEl = h('span', { class: 'name' });
  view.stateEl = h('span', { class: 'state' });
  view.statusEl = h('span', { class: 'dim' });
  view.factsEl = h('div');
  view.el = h('div', { class: 'actor', 'data-actor-id': m.id, 'data-machine': m.machine }, [
    h('div', { class: 'title' }, [view.nameEl, view.stateEl, view.statusEl]),
  ]);
  if (isClient) {
    view.streamsEl = h('div', { class: 'streams' });
    view.cursorsEl = h('div');
    view.el.appendChild(h('div', { class: 'regions' }, [
      h('div', { class: 'region session-region' }, [h('h3', { text: 'session region' }), view.drawn.el, view.factsEl]),
      h('div', { class: 'region transport-region' }, [
        h('h3', { text: 'transport region: one machine per stream' }), view.cursorsEl, view.streamsEl,
      ]),
    ]));
  } else {
    view.el.appendChild(view.drawn.el);
    view.el.appendChild(view.factsEl);
  }
  actors.set(m.id, view);
  dirty.add(m.id);
  // Children that arrived before their parent move in now.
  actors.forEach(function (child) { if (child.parentId === m.id) dirty.add(child.id); });
}

function groupKeyOf(view) {
  if (MODERN_MACHINES[view.machine]) return modernGroupKey(view);
  if (view.machine === 'listenLog') return 'listenlog:' + view.id;
  var ctx = view.snapshot.context || {};
  if ((view.machine === 'client' || view.machine === 'serverSession') && typeof ctx.sessionId === 'string') {
    return 'mcp:' + ctx.sessionId;
  }
  return 'actor:' + (view.rootId || view.id);
}

function ensureGroup(key) {
  var g = groups.get(key);
  if (g) return g;
  var title = key.indexOf('mcp:') === 0 ? 'MCP session ' + key.slice(4)
    : key.indexOf('actor:') === 0 ? 'no session yet'
    : key.indexOf('listenlog:') === 0 ? 'MCP 2026-07-28 listen log on the server (subscriptions/listen)' : modernGroupTitle(key);
  g = { key: key };
  g.badges = h('span');
  g.clients = h('div', { class: 'clients' }, [h('h3', { text: 'client' })]);
  g.servers = h('div', { class: 'servers' }, [h('h3', { text: 'server' })]);
  g.el = h('section', { class: 'session-group', 'data-mcp-session': key.indexOf('mcp:') === 0 ? key.slice(4) : '',
    'data-idempotency-key': key.indexOf('key:') === 0 ? key.slice(4) : undefined }, [
    h('h2', {}, [title, g.badges]),
    h('div', { class: 'sides' }, [g.clients, g.servers]),
  ]);
  $('sessions').appendChild(g.el);
  groups.set(key, g);
  return g;
}

function place(view) {
  var parent = view.parentId ? actors.get(view.parentId) : undefined;
  if (parent && parent.streamsEl) {
    if (view.el.parentNode !== parent.streamsEl) parent.streamsEl.appendChild(view.el);
    return;
  }
  var g = ensureGroup(groupKeyOf(view));
  var column = view.machine === 'serverSession' || view.machine === 'keyedRequest' || view.machine === 'listenLog'
    ? g.servers : g.clients;
  if (view.el.parentNode !== column) column.appendChild(view.el);
}

function dropEmptyGroups() {
  groups.forEach(function (g, key) {
    if (!g.el.querySelector('.actor')) { g.el.remove(); groups.delete(key); }
  });
}

/* A stream machine's fixed description (key, kind, policy) is nested in its context as context.stream. */
function streamInputOf(ctx) { return (ctx && ctx.stream) || {}; }

function labelOf(view) {
  var ctx = view.snapshot.context || {};
  if (view.machine === 'stream') return 'stream ' + (streamInputOf(ctx).key || '?');
  if (view.machine === 'client') return 'client session machine';
  if (view.machine === 'listenLog') return 'listen log ' + short(ctx.epoch);
  if (view.machine === 'serverSession') return 'server session machine';
  if (MODERN_MACHINES[view.machine]) return modernLabel(view);
  return view.machine;
}

function renderActor(view) {
  var snap = view.snapshot;
  var state = stateText(snap.value);
  paintChart(view.drawn, snap.value);
  view.el.setAttribute('data-state', state);
  view.el.setAttribute('data-status', snap.status);
  view.el.classList.toggle('ended', snap.status !== 'active');
  if (view.machine === 'stream') {
    var input = streamInputOf(snap.context);
    view.el.setAttribute('data-stream-key', input.key || '');
    view.el.setAttribute('data-stream-kind', input.kind || '');
  }
  view.nameEl.textContent = labelOf(view);
  view.stateEl.textContent = state;
  view.statusEl.textContent = snap.status === 'active' ? '' : snap.status;
  view.factsEl.textContent = '';
  view.factsEl.appendChild(factsFor(view));
  if (view.cursorsEl) { view.cursorsEl.textContent = ''; view.cursorsEl.appendChild(cursorTable(snap.context || {})); }
  place(view);
  if (view.machine === 'stream' && snap.status !== 'active' && !view.removeTimer && !scrubbing) {
    // A finished stream stays a moment so its last state can be read, then makes room.
    view.removeTimer = setTimeout(function () { view.el.remove(); actors.delete(view.id); }, ENDED_STREAM_MS);
  }
}

/* ---- facts per machine ---- */

function facts(rows) {
  var dl = h('dl', { class: 'facts' });
  rows.forEach(function (r) {
    if (r[1] === undefined || r[1] === null || r[1] === '') return;
    dl.appendChild(h('dt', { text: r[0] }));
    dl.appendChild(h('dd', { text: String(r[1]) }));
  });
  return dl;
}

function factsFor(view) {
  var c = view.snapshot.context || {};
  if (view.machine === 'client') return clientFacts(c);
  if (view.machine === 'stream') return streamFacts(c, stateText(view.snapshot.value));
  if (view.machine === 'serverSession') return serverFacts(c, view.windows);
  if (MODERN_MACHINES[view.machine]) return modernFacts(view);
  if (view.machine === 'listenLog') return listenLogFacts(c);
  return h('pre', { text: JSON.stringify(c, null, 1).slice(0, 2000) });
}

function clientFacts(c) {
  var ledger = c.ledger || {};
  var pending = Object.keys(ledger).map(function (k) {
    var e = ledger[k] || {};
    var r = e.request || {};
    var name = r.params && r.params.name;
    return k + ' ' + (r.method || '?') + (name ? ' ' + name : '') + (e.resends ? ' (re-sent ' + e.resends + '×)' : '');
  });
  return facts([
    ['Mcp-Session-Id', c.sessionId || '(none yet)'],
    ['protocol', c.protocolVersion],
    ['server promises', promisesText(c.advertisement)],
    ['calls in flight (ledger)', pending.length ? pending.join('; ') : 'none'],
    ['queued while re-initializing', c.queue && c.queue.length ? c.queue.length : undefined],
    ['to re-send on the new session', c.resendQueue && c.resendQueue.length ? c.resendQueue.length : undefined],
  ]);
}

/* Only what the server advertised: each promise is optional. */
function promisesText(adv) {
  if (!adv) return undefined;
  var parts = [];
  if (typeof adv.retentionMs === 'number') parts.push('retention ' + adv.retentionMs + ' ms');
  if (typeof adv.maxEventsPerStream === 'number') parts.push(adv.maxEventsPerStream + ' events per stream');
  if (typeof adv.idleTtlMs === 'number') parts.push('idle TTL ' + adv.idleTtlMs + ' ms');
  if (adv.gapSignalling) parts.push('flags gaps');
  if (adv.duplicateRequestProtection) parts.push('dedupes');
  return parts.length ? parts.join(', ') : 'nothing';
}

function cursorTable(c) {
  var cursors = c.cursors || {};
  var keys = Object.keys(cursors);
  var table = h('table', { class: 'cursors' }, [
    h('caption', { text: 'per-stream cursors (what the cursor store holds)' }),
    h('tr', {}, [h('th', { text: 'stream' }), h('th', { text: 'kind' }), h('th', { text: 'Last-Event-ID' })]),
  ]);
  keys.forEach(function (k) {
    var cur = cursors[k] || {};
    table.appendChild(h('tr', { 'data-cursor': k }, [
      h('td', { text: k }), h('td', { text: cur.kind || '' }), h('td', { text: cur.lastEventId || '—' }),
    ]));
  });
  if (keys.length === 0) table.appendChild(h('tr', {}, [h('td', { text: 'none', colspan: 3 })]));
  return table;
}

function decisionText(d) {
  if (!d || !d.action) return undefined;
  if (d.action === 'events-lost') {
    var gap = d.gap || {};
    return 'events lost (' + (gap.reason || 'unknown reason') + ', ' +
      (typeof gap.lostCount === 'number' ? gap.lostCount : 'count unknown') + ')';
  }
  var extra = d.reason || d.status;
  return d.action + (extra ? ' (' + extra + ')' : '');
}

function streamFacts(c, state) {
  var input = streamInputOf(c);
  var maxRetries = (input.policy || {}).maxRetries;
  // The standalone stream reconnects without a limit; the others give up after maxRetries.
  var limit = input.kind !== 'standalone' && typeof maxRetries === 'number' ? ' of ' + maxRetries : '';
  return facts([
    ['kind', input.kind],
    ['cursor', c.lastEventId || '—'],
    ['attempt', typeof c.attempt === 'number' ? c.attempt + limit : undefined],
    ['reconnect in', state === 'backoff' ? c.nextDelayMs + ' ms' : undefined],
    ['last close', decisionText(c.decision)],
    ["server's retry", c.serverRetryMs !== undefined ? c.serverRetryMs + ' ms' : undefined],
    ['gap since open', c.gapSinceOpen ? 'yes' : undefined],
  ]);
}

/* The server's listen log (2026-07-28 subscriptions/listen with the extension), as its mirror holds it. */
function listenLogFacts(c) {
  var held = Math.max(0, c.head - c.oldest + 1);
  return facts([
    ['epoch', c.epoch],
    ['head (position)', c.head],
    ['held', held ? c.oldest + '..' + c.head + ' (' + held + ')' : 'none'],
    ['retention', c.retentionMs + ' ms, at most ' + c.maxChanges + ' changes'],
    ['listens acknowledged', c.listens],
    ['re-opens', c.reopens],
    ['exact gaps', c.exactGaps ? c.exactGaps + ' (' + c.missedChanges + ' changes missed)' : '0'],
    ['unknown gaps', c.unknownGaps],
    ['last re-open', c.lastReopen],
  ]);
}

function serverFacts(c, windows) {
  var wrap = h('div');
  wrap.appendChild(facts([
    ['Mcp-Session-Id', c.sessionId],
    ['epoch', c.epoch],
    ['principal', c.principal],
    ['requests running', c.inFlight],
    ['streams attached', c.attached],
    ['request ids remembered', Object.keys(c.requests || {}).length],
    ['idle TTL', c.idleTtlMs !== undefined ? c.idleTtlMs + ' ms' : undefined],
  ]));
  var streams = c.streams || {};
  var table = h('table', { class: 'windows' }, [
    h('caption', { text: "Streams the machine knows. The retained window is the event log's, as it was at the last resume " +
      "on that stream: the machine holds no windows." }),
    h('tr', {}, ['stream', 'kind', 'request', 'retained (oldest..head)', 'resume asked after'].map(function (t) {
      return h('th', { text: t });
    })),
  ]);
  Object.keys(streams).forEach(function (n) {
    var s = streams[n] || {};
    var w = windows.get(Number(n));
    table.appendChild(h('tr', { 'data-stream': n }, [
      h('td', { text: n }), h('td', { text: s.kind || '' }), h('td', { text: s.requestKey || '' }),
      h('td', { text: w ? w.oldest + '..' + w.head + ' (' + Math.max(0, w.head - w.oldest + 1) + ')' + (w.finished ? ', finished' : '') : '—' }),
      h('td', { text: w && w.requestedSeq !== undefined ? String(w.requestedSeq) + (w.requestedSeq + 1 < w.oldest ? ' (evicted)' : '') : '' }),
    ]));
  });
  wrap.appendChild(table);
  return wrap;
}

/* ---- markers, figures, feeds, timeline ---- */

function addMarker(marker, text) {
  var li = h('li', { class: 'marker ' + marker.kind, 'data-key': marker.key, 'data-actor-id': marker.actorId }, [
    h('span', { class: 'when', text: when(marker.at) }), text,
  ]);
  $('marker-list').appendChild(li);
  markers.push(marker);
  if (markers.length > MAX_MARKERS) markers.shift();
  badgesDirty = true;
  renderCounts();
}

/*
 * Each session group's badges, counted from the markers of its actors. Counted at render time, not when a
 * marker arrives: a page that opens late gets the markers in the same batch as the actors, before any
 * group exists, and an actor changes group when it learns its Mcp-Session-Id.
 */
function renderBadges() {
  var counts = new Map();
  markers.forEach(function (m) {
    var view = actors.get(m.actorId);
    if (!view) return;
    var key = groupKeyOf(view);
    var c = counts.get(key) || { gap: 0, 'outcome-unknown': 0 };
    if (c[m.kind] !== undefined) c[m.kind]++;
    counts.set(key, c);
  });
  groups.forEach(function (g, key) {
    var c = counts.get(key) || { gap: 0, 'outcome-unknown': 0 };
    g.badges.textContent = '';
    if (c.gap) g.badges.appendChild(h('span', { class: 'badge gap', text: c.gap + ' gap' + (c.gap > 1 ? 's' : '') }));
    if (c['outcome-unknown']) g.badges.appendChild(h('span', { class: 'badge outcome-unknown', text: c['outcome-unknown'] + ' outcome unknown' }));
  });
}

function renderCounts() {
  var gaps = document.querySelectorAll('#marker-list .marker.gap').length;
  var unknown = document.querySelectorAll('#marker-list .marker.outcome-unknown').length;
  $('marker-counts').textContent = gaps + ' gap' + (gaps === 1 ? '' : 's') + ' · ' + unknown + ' outcome unknown';
}

function setFigures(m) {
  var entry = figureTables.get(m.feed);
  if (!entry) {
    entry = { values: {}, body: h('tbody') };
    entry.el = h('table', { 'data-feed': m.feed }, [h('caption', { text: m.name }), entry.body]);
    figureTables.set(m.feed, entry);
    $('figure-tables').appendChild(entry.el);
  }
  entry.body.textContent = '';
  Object.keys(m.figures).sort().forEach(function (name) {
    var value = m.figures[name];
    var changed = entry.values[name] !== undefined && entry.values[name] !== value;
    entry.body.appendChild(h('tr', { 'data-figure': name, class: changed ? 'changed' : '' }, [
      h('td', { text: name }), h('td', { class: 'num', text: Number.isInteger(value) ? value : value.toFixed(2) }),
    ]));
  });
  entry.values = m.figures;
}

function renderFeeds() {
  var el = $('feeds');
  el.textContent = '';
  feeds.forEach(function (f) {
    el.appendChild(h('span', { class: 'feed' + (f.connected ? '' : ' gone'), title: f.connected ? 'feeding' : 'disconnected',
      text: (f.connected ? '● ' : '○ ') + f.name }));
  });
}

function flushTimeline() {
  if (pendingRows.length === 0) return;
  var list = $('timeline-list');
  var atBottom = list.scrollTop + list.clientHeight >= list.scrollHeight - 30;
  var frag = document.createDocumentFragment();
  pendingRows.forEach(function (e) {
    frag.appendChild(h('li', { class: 'tl tl-' + e.kind + (e.chatter ? ' chatter' : ''), 'data-actor-id': e.actorId }, [
      h('span', { class: 'when', text: when(e.at) }), h('span', { class: 'who', text: e.label, title: e.label }),
      h('span', { class: 'what', text: e.text }),
    ]));
  });
  pendingRows = [];
  list.appendChild(frag);
  var extra = list.childElementCount - 800;
  for (var i = 0; i < extra; i++) list.removeChild(list.firstChild);
  if (atBottom) list.scrollTop = list.scrollHeight;
}

function render() {
  if (dirty.size > 0) badgesDirty = true;
  dirty.forEach(function (id) { var view = actors.get(id); if (view) renderActor(view); });
  dirty.clear();
  dropEmptyGroups();
  if (badgesDirty) { renderBadges(); badgesDirty = false; }
  flushTimeline();
  $('empty').style.display = actors.size === 0 ? '' : 'none';
}

/* ---- connection, and the @statelyai/inspect browser inspector relay ---- */

function setStatus(cls, text) { var s = $('status'); s.className = cls; s.textContent = text; }

function connect() {
  var ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/live');
  socket = ws;
  ws.onopen = function () { setStatus('live', 'live'); flushRelay(); };
  ws.onmessage = function (e) {
    var batch;
    try { batch = JSON.parse(e.data); } catch (err) { return; }
    if (!Array.isArray(batch)) return;
    applyBatch(batch);
    schedule();
  };
  ws.onclose = function () {
    if (socket === ws) socket = null;
    setStatus('down', 'disconnected; retrying');
    setTimeout(connect, 1000);
  };
}

function flushRelay() {
  if (!socket || socket.readyState !== 1 || relayQueue.length === 0) return;
  socket.send(JSON.stringify(relayQueue.splice(0)));
}

window.addEventListener('message', function (e) {
  var d = e.data;
  if (!d || typeof d.type !== 'string' || typeof d._version !== 'string' || d.type.indexOf('@xstate.') !== 0) return;
  relayQueue.push(d);
  if (relayQueue.length > 5000) relayQueue.shift();
  setTimeout(flushRelay, 50);
});

$('show-chatter').addEventListener('change', function (e) {
  $('timeline-list').classList.toggle('show-chatter', e.target.checked);
});
$('feed-url').textContent = 'ws://' + location.host + '/feed';

/* ---- the time scrubber, when the server replays a trace ---- */

function applyBatch(batch) {
  for (var i = 0; i < batch.length; i++) {
    try { apply(batch[i]); } catch (err) { console.error('inspector:', err); }
  }
}

function seek(stop) {
  var n = Math.max(0, Math.min(scrubbing.stops.length - 1, stop));
  var seq = ++scrubSeq;
  $('scrub-range').value = String(n);
  $('scrubber').setAttribute('data-stop', String(n));
  $('scrub-at').textContent = (n + 1) + '/' + scrubbing.stops.length + '  ' + scrubbing.stops[n].label;
  fetch('/scrub/at?stop=' + n, { cache: 'no-store' }).then(function (r) { return r.json(); }).then(function (batch) {
    // A later move already asked for another instant: this answer is stale.
    if (seq !== scrubSeq || !Array.isArray(batch)) return;
    applyBatch(batch);
    if (timer !== null) { clearTimeout(timer); timer = null; }
    render();
    $('scrubber').setAttribute('data-shown-stop', String(n));
  }).catch(function (err) { setStatus('down', 'replay server gone: ' + err); });
}

function startScrubber(s) {
  scrubbing = s;
  setStatus('replay', 'replay of a trace');
  $('scrubber').hidden = false;
  $('scrub-note').textContent = s.note || '';
  $('scrub-range').max = String(Math.max(0, s.stops.length - 1));
  $('scrub-range').addEventListener('input', function (e) { seek(Number(e.target.value)); });
  $('scrub-prev').addEventListener('click', function () { seek(Number($('scrub-range').value) - 1); });
  $('scrub-next').addEventListener('click', function () { seek(Number($('scrub-range').value) + 1); });
  if (s.stops.length === 0) { $('scrub-at').textContent = 'the trace holds no machine this build has'; return; }
  seek(s.stops.length - 1);
}

fetch('/scrub.json', { cache: 'no-store' }).then(function (r) { return r.ok ? r.json() : null; }).then(function (s) {
  if (s && Array.isArray(s.stops)) startScrubber(s);
  else connect();
}).catch(function () { connect(); });
// Tell a @statelyai/inspect browser inspector that opened (or framed) this page that it may send.
var inspectorWindow = window.opener || (window.parent !== window ? window.parent : null);
if (inspectorWindow) { try { inspectorWindow.postMessage({ type: '@statelyai.connected' }, '*'); } catch (err) {} }
`;
