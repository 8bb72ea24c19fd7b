/**
 * Browser code for the 2026-07-28 machines (no sessions): a call is grouped with the server's keyed
 * request of the same idempotency key (client column, server column), a listen stream stands alone. The
 * facts come from the hub's `modern` view of each actor (src/inspect/modern-view.ts). Built with
 * textContent only, as the rest of the page. Written without template literals: it lives inside one.
 */
export const MODERN_SCRIPT = `
var MODERN_MACHINES = { modernCall: true, keyedRequest: true, listen: true };

/* The group a 2026 actor belongs to: its idempotency key, else the actor itself. */
function modernGroupKey(view) {
  var v = view.modern;
  if (!v) return 'actor:' + (view.rootId || view.id);
  if ((v.kind === 'call' || v.kind === 'keyed') && v.key) return 'key:' + v.key;
  return (v.kind === 'listen' ? 'listen:' : 'call:') + view.id;
}

function modernGroupTitle(key) {
  if (key.indexOf('key:') === 0) return 'MCP 2026-07-28 call, idempotency key ' + key.slice(4);
  if (key.indexOf('listen:') === 0) return 'MCP 2026-07-28 subscriptions/listen';
  return 'MCP 2026-07-28 call without an idempotency key';
}

function modernLabel(view) {
  var v = view.modern || {};
  if (view.machine === 'modernCall') return 'client call machine' + (v.tool ? ': ' + v.tool : '');
  if (view.machine === 'keyedRequest') return 'server keyed request machine';
  return 'listen stream machine';
}

function table(caption, heads, rows) {
  var t = h('table', { class: 'attempts' }, [
    h('caption', { text: caption }),
    h('tr', {}, heads.map(function (x) { return h('th', { text: x }); })),
  ]);
  rows.forEach(function (r) { t.appendChild(r); });
  return t;
}

function cells(attrs, values) {
  return h('tr', attrs, values.map(function (x) { return h('td', { text: x === undefined ? '' : String(x) }); }));
}

function decisionWords(a) {
  if (!a.decision) return '';
  return a.decision + (a.reason ? ' (' + a.reason + ')' : '') + (a.delayMs ? ', after ' + a.delayMs + ' ms' : '');
}

function callFacts(v) {
  var wrap = h('div');
  wrap.appendChild(facts([
    ['request id', v.requestId],
    ['idempotency key', v.key || 'none (sent without the extension)'],
    ['outcome', v.outcome ? v.outcome + (v.reason ? ' (' + v.reason + ')' : '') : 'in flight'],
  ]));
  var rows = v.attempts.map(function (a) {
    return cells({ 'data-attempt': a.n, 'data-attempt-id': a.id, 'data-decision': a.decision || '' }, [
      a.n === 0 ? 'first' : 're-issue ' + a.n,
      a.id,
      a.lastEventId === undefined ? '' : a.lastEventId === null ? 'none seen' : a.lastEventId,
      a.status === undefined ? (a.end ? 'no response' : '') : a.status,
      a.messages,
      a.bytes,
      a.end || 'in flight',
      decisionWords(a),
    ]);
  });
  wrap.appendChild(table('attempts: each one POST with its own JSON-RPC id; the cut, and what the machine decided',
    ['attempt', 'id', 'last event id sent', 'status', 'messages', 'bytes', 'end', 'decision'], rows));
  return wrap;
}

function keyedFacts(v) {
  var wrap = h('div');
  wrap.appendChild(facts([
    ['idempotency key', v.key],
    ['principal', v.principal || undefined],
    ['work', v.state],
  ]));
  wrap.appendChild(h('p', { class: 'executions', 'data-executions': v.executions,
    text: 'bodies started here: ' + v.executions + (v.executions === 1 ? ' (the side effect ran once)' : '') }));
  var rows = v.attempts.map(function (a) { return cells({ 'data-attempt-id': a.id }, [a.id, a.answer]); });
  wrap.appendChild(table('attempts that reached the server under this key', ['id', 'answered'], rows));
  return wrap;
}

function listenFacts(v) {
  var wrap = h('div');
  wrap.appendChild(facts([
    ['subscription id', v.subscriptionId],
    ['attempt in flight', v.currentId],
    ['position', v.position || 'none yet'],
    ['re-opens', v.reopens],
  ]));
  var rows = v.gaps.map(function (g, i) {
    return cells({ 'data-gap': i }, [i + 1, g.missed === null ? 'unknown' : g.missed + ' changes', g.attempts]);
  });
  wrap.appendChild(table('gaps: what each re-open after a break missed', ['gap', 'missed', 're-open attempts'], rows));
  return wrap;
}

function modernFacts(view) {
  var v = view.modern;
  if (!v) return h('div');
  if (v.kind === 'call') return callFacts(v);
  if (v.kind === 'keyed') return keyedFacts(v);
  return listenFacts(v);
}
`;
