/**
 * What the probe saw of one HTTP exchange, as plain data: the I/O shell (src/cli/probe/http.ts) fills it
 * in, the checks (./legacy-checks.ts, ./modern-checks.ts) read it. Pure helpers over it live here.
 */

/** One server-sent event as the probe read it. */
export interface SeenEvent {
  readonly id?: string;
  readonly event?: string;
  readonly data: string;
}

/** How reading an answer stopped. */
export type ExchangeEnd =
  /** The body ended (or the awaited message arrived and the probe stopped reading). */
  | 'complete'
  /** The probe's deadline for this exchange passed first (a cut, when the probe meant to cut). */
  | 'timeout'
  /** The body passed the probe's byte limit. */
  | 'too-large'
  /** No HTTP answer at all: connection refused, reset, DNS... (`error` says which). */
  | 'network';

export interface Exchange {
  /** 0 when there was no HTTP answer. */
  readonly status: number;
  readonly contentType: string | null;
  /** Response headers, names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  /** Server-sent events, in order (an event-stream answer). */
  readonly events: readonly SeenEvent[];
  /** A JSON body, parsed (a JSON answer); undefined for anything else. */
  readonly json?: unknown;
  readonly end: ExchangeEnd;
  /** Milliseconds from sending to the end of reading. */
  readonly ms: number;
  /** Milliseconds from sending to the first body byte, when one came. */
  readonly firstByteMs?: number;
  readonly error?: string;
}

/** Every JSON message of an answer: the JSON body (or each of a batch), then each event's data. */
export function messagesOf(x: Exchange): unknown[] {
  const out: unknown[] = [];
  if (x.json !== undefined) out.push(...(Array.isArray(x.json) ? x.json : [x.json]));
  for (const e of x.events) {
    if (e.data.trim() === '') continue;
    try {
      out.push(JSON.parse(e.data));
    } catch {
      // Not JSON: not a message (the checks count messages, not bytes).
    }
  }
  return out;
}

/** The JSON-RPC response to `id` in an answer, if it came. */
export function responseTo(x: Exchange, id: string | number): Record<string, unknown> | undefined {
  for (const m of messagesOf(x)) {
    const r = record(m);
    if (r && r.id === id && ('result' in r || 'error' in r)) return r;
  }
  return undefined;
}

/** Whether the answer so far holds the response to `id` (the probe stops reading a stream there). */
export const answered =
  (id: string | number) =>
  (events: readonly SeenEvent[]): boolean =>
    responseTo({ status: 200, contentType: null, headers: {}, events, end: 'complete', ms: 0 }, id) !==
    undefined;

/** The JSON-RPC error of an answer (the response's, or an id-less HTTP-level one). */
export function errorOf(x: Exchange): { code?: number; message?: string; data?: unknown } | undefined {
  for (const m of messagesOf(x)) {
    const e = record(record(m)?.error);
    if (e)
      return {
        ...(typeof e.code === 'number' ? { code: e.code } : {}),
        ...(typeof e.message === 'string' ? { message: e.message } : {}),
        ...('data' in e ? { data: e.data } : {}),
      };
  }
  return undefined;
}

/** The `id` of the last event that had one. */
export function lastEventId(x: Exchange): string | undefined {
  for (let i = x.events.length - 1; i >= 0; i--) {
    const id = x.events[i]?.id;
    if (id !== undefined && id !== '') return id;
  }
  return undefined;
}

/** The first event id of an answer: on a priming stream, the priming event's. */
export function firstEventId(x: Exchange): string | undefined {
  return x.events.find((e) => e.id !== undefined && e.id !== '')?.id;
}

/** Whether any of these requests got an HTTP answer (of any status). */
export const answeredAtAll = (xs: readonly Exchange[]): boolean => xs.some((x) => x.status !== 0);

/** Whether a `Content-Type` is an event stream (read as SSE) rather than a body to parse as JSON. */
export const isEventStreamType = (contentType: string | null): boolean =>
  (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'text/event-stream';

export const isEventStream = (x: Exchange): boolean => isEventStreamType(x.contentType);

/** `status (content type)`, or the network error: how a report names an answer in one phrase. */
export function describeAnswer(x: Exchange): string {
  if (x.status === 0) return `no answer (${x.error ?? x.end})`;
  const type = (x.contentType ?? '').split(';')[0]?.trim();
  const error = errorOf(x);
  const parts = [`${x.status}${type ? ` ${type}` : ''}`];
  if (error?.code !== undefined)
    parts.push(`error ${error.code}${error.message ? ` "${clip(error.message)}"` : ''}`);
  if (isEventStream(x)) parts.push(`${x.events.filter((e) => e.data.trim() !== '').length} event(s)`);
  if (x.end === 'timeout') parts.push(`still open after ${Math.round(x.ms)} ms`);
  if (x.end === 'too-large') parts.push('body over the byte limit');
  return parts.join(', ');
}

/**
 * `answered 404 ...`, or `got no answer (ECONNREFUSED)`: a sentence's verb and object. A 401 or 403 says
 * how to pass credentials: the server may serve this era to a caller it knows.
 */
export const answerPhrase = (x: Exchange): string => {
  if (x.status === 0) return `got ${describeAnswer(x)}`;
  const auth =
    x.status === 401 || x.status === 403
      ? " (it wants credentials: give them with --header 'Authorization: ...')"
      : '';
  return `answered ${describeAnswer(x)}${auth}`;
};

const clip = (s: string) => (s.length > 80 ? `${s.slice(0, 77)}...` : s);

export function record(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : undefined;
}
