/**
 * The probe's one way onto the network: a request sent and its answer read (JSON or server-sent events)
 * within a deadline and a byte limit, returned as data for machines/probe to judge.
 */
import { createParser } from 'eventsource-parser';
import { overByteCap } from '../../../machines/client/limits.js';
import { brokenEnd } from '../../../machines/probe/schedule.js';
import {
  type Exchange,
  type ExchangeEnd,
  isEventStreamType,
  type SeenEvent,
} from '../../../machines/probe/wire.js';

/** The bounds every probe request runs under. */
export interface ExchangeLimits {
  /**
   * The whole exchange (connect, headers, body) ends by then: a stream still open is closed. Given by
   * `exchangeDeadlineMs` (machines/probe/schedule.ts).
   */
  readonly timeoutMs: number;
  /** A body longer than this is not read further. */
  readonly maxBytes: number;
  /** Stop reading an event stream once this holds (the awaited response came). */
  readonly until?: (events: readonly SeenEvent[]) => boolean;
}

export interface ProbeRequest {
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: unknown;
}

/**
 * Sends one request and reads its answer within `limits`, as data (machines/probe/wire.ts). It decides
 * nothing about what the answer means; it never throws for a network failure (that is an answer too).
 */
export async function exchange(
  url: string,
  request: ProbeRequest,
  limits: ExchangeLimits,
): Promise<Exchange> {
  const started = performance.now();
  const abort = new AbortController();
  let deadlinePassed = false;
  const cancelTimer = after(limits.timeoutMs, () => {
    deadlinePassed = true;
    abort.abort();
  });
  const elapsed = () => performance.now() - started;
  let response: Response;
  try {
    response = await fetch(url, {
      method: request.method,
      headers: request.headers,
      ...(request.body === undefined ? {} : { body: JSON.stringify(request.body) }),
      signal: abort.signal,
      redirect: 'manual',
    });
  } catch (error) {
    cancelTimer();
    const end = brokenEnd(deadlinePassed);
    return {
      status: 0,
      contentType: null,
      headers: {},
      events: [],
      end,
      ms: elapsed(),
      error: causeOf(error),
    };
  }
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name.toLowerCase()] = value;
  });
  const contentType = response.headers.get('content-type');
  const stream = isEventStreamType(contentType);
  const events: SeenEvent[] = [];
  const parser = createParser({
    onEvent: (e) =>
      events.push({
        ...(e.id === undefined ? {} : { id: e.id }),
        ...(e.event === undefined ? {} : { event: e.event }),
        data: e.data,
      }),
  });
  const reader = response.body?.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let size = 0;
  let firstByteMs: number | undefined;
  let end: ExchangeEnd = 'complete';
  try {
    for (;;) {
      if (stream && limits.until?.(events)) break;
      const chunk = reader ? await reader.read() : { done: true as const, value: undefined };
      if (chunk.done) break;
      firstByteMs ??= elapsed();
      size += chunk.value.byteLength;
      if (overByteCap(size, limits.maxBytes)) {
        end = 'too-large';
        break;
      }
      const piece = decoder.decode(chunk.value, { stream: true });
      if (stream) parser.feed(piece);
      else text += piece;
    }
  } catch {
    end = brokenEnd(deadlinePassed);
  } finally {
    cancelTimer();
    // Closing is how the probe stops reading (and, on 2026-07-28, how a stream is cut).
    abort.abort();
    await reader?.cancel().catch(() => undefined);
  }
  let json: unknown;
  if (!stream && end === 'complete' && text.trim() !== '') {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  return {
    status: response.status,
    contentType,
    headers,
    events,
    ...(json === undefined ? {} : { json }),
    end,
    ms: elapsed(),
    ...(firstByteMs === undefined ? {} : { firstByteMs }),
  };
}

/** A fetch failure in a few words (`ECONNREFUSED`, `aborted`...), never the stack. */
function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } } | undefined)?.cause;
  if (cause?.code) return cause.code;
  if (cause?.message) return cause.message;
  return error instanceof Error ? error.message : String(error);
}

/** Waits `ms` (a wait machines/probe decided, e.g. `evictionWait`). */
export const pause = (ms: number): Promise<void> => new Promise((resolve) => after(ms, resolve));

/**
 * The probe's one timer: runs `fire` after `ms`, unless the returned cancel is called first. Every delay
 * it is given comes from machines/probe (`exchangeDeadlineMs`, `evictionWait`); it chooses none.
 */
function after(ms: number, fire: () => void): () => void {
  const timer = setTimeout(fire, ms);
  return () => clearTimeout(timer);
}
