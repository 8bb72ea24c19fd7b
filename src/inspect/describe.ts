/**
 * One line per event for the timeline, and a name per actor, in the vocabulary of the README: a person
 * watching a resume wants "http.response 410", not the event object.
 */
type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});
const short = (id: unknown): string =>
  typeof id === 'string' && id.length > 12 ? `${id.slice(0, 8)}…` : String(id);

/** Routine traffic: one per SSE event or heartbeat. Shown only when the timeline is asked for everything. */
const CHATTER = new Set([
  'sse.event',
  'sse.events',
  'sse.activity',
  'sse.retry',
  'stream.message',
  'stream.messages',
  'stream.cursor',
  'session.activity',
  'xstate.init',
  'attempt.activity',
  'attempt.message',
]);

export function isChatter(eventType: string): boolean {
  return CHATTER.has(eventType);
}

export function actorLabel(machine: string, context: unknown, fallback: string): string {
  const ctx = obj(context);
  const stream = obj(ctx.stream);
  if (machine === 'stream' && typeof stream.key === 'string') return `stream ${stream.key}`;
  // Before its first snapshot an actor has no context yet: a bare name, never "server undefined".
  if (machine === 'serverSession')
    return typeof ctx.sessionId === 'string' ? `server ${short(ctx.sessionId)}` : 'server';
  if (machine === 'client') return ctx.sessionId ? `client ${short(ctx.sessionId)}` : 'client';
  // 2026-07-28: a call by its tool, the server's work by its key, a listen stream by its subscription.
  if (machine === 'modernCall') {
    const name = obj(obj(ctx.request).params).name;
    return typeof name === 'string' ? `call ${name}` : 'call';
  }
  if (machine === 'keyedRequest') return 'keyed request';
  if (machine === 'listen') return `listen ${short(obj(ctx.request).id ?? '?')}`;
  return machine || fallback;
}

export function describeEvent(event: unknown): string {
  const e = obj(event);
  const type = typeof e.type === 'string' ? e.type : '?';
  // A timer fired: `xstate.after.<delay>.<state id>` reads better as the delay's name.
  if (type.startsWith('xstate.after.')) return `after ${type.slice('xstate.after.'.length).split('.')[0]}`;
  const detail = details(type, e);
  return detail ? `${type} ${detail}` : type;
}

function details(type: string, e: Obj): string {
  switch (type) {
    case 'http.response':
      return String(e.status);
    case 'net.failed':
      return String(e.fault);
    case 'sse.event':
      return e.id === undefined ? '' : `id ${e.id}`;
    case 'sse.events':
      return Array.isArray(e.events) ? `${e.events.length} events` : '';
    case 'stream.ended':
      return `${e.key}: ${obj(e.outcome).kind}`;
    case 'stream.gap': {
      const gap = obj(e.gap);
      return `${e.key}: ${gap.lostCount ?? 'unknown'} lost (${gap.reason})`;
    }
    case 'stream.opened':
    case 'stream.cursor':
    case 'stream.message':
    case 'stream.answered':
      return typeof e.key === 'string' ? e.key : '';
    case 'stream.messages':
      return `${typeof e.key === 'string' ? e.key : ''}: ${Array.isArray(e.messages) ? e.messages.length : 0} messages`;
    case 'app.send': {
      const m = obj(e.message);
      const name = obj(m.params).name;
      return m.method ? `${m.method}${typeof name === 'string' ? ` ${name}` : ''}` : 'response';
    }
    case 'request.received':
    case 'request.settled':
      return String(e.requestKey);
    case 'request.unanswered':
      return `${String(e.requestKey)} (${String(e.cause)})`;
    case 'resume.requested':
      return `Last-Event-ID ${e.lastEventId}`;
    case 'attempt.ended': {
      const end = obj(e.end);
      return end.kind === 'http-status' ? `HTTP ${end.status}` : String(end.kind);
    }
    case 'reissue.arrived':
    case 'stream.closed':
      return String(e.attacher);
    case 'tool.finished':
    case 'tool.refused':
      return String(obj(e.outcome).kind);
    case 'server.stopping':
      return e.durableLog ? '(durable log)' : '';
    default:
      return '';
  }
}
