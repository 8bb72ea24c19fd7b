import type { JsonRpcMessage } from '../jsonrpc.js';

/**
 * What a key's event log keeps of the messages its body sends (docs/continuity-extension.md §4), and how
 * much. The log is kept for the memo window, so what it holds per key must be bounded by what the server
 * chose, not by what a caller or a tool sent. Pure: the runtime (src/server/keyed) measures and appends.
 *
 * - A progress notification is kept WITHOUT its progress token: every attempt is written its own token at
 *   delivery (`deliverAs`), so the stored one is never sent; a 1 MiB token on each of 100 notifications
 *   would otherwise hold 100 MiB for the window.
 * - The events of one key are bounded in bytes (`maxEventBytesPerKey`), as they are in count by the
 *   log's policy (`maxEventsPerRequest`). Past the byte budget, the body's further messages are not
 *   kept, hence not delivered to any attempt (first or re-issue): the stream keeps its prefix and never
 *   shows a later event without the earlier ones. The final response is never subject to the budget: the
 *   outcome is recorded in the memo whatever its events did, so a call past the budget is still answered
 *   exactly once, with its one result, and a re-issue of its key never runs it again.
 */

/** Bytes of events one key's log keeps by default (its stored form, JSON, UTF-8). */
export const DEFAULT_MAX_EVENT_BYTES_PER_KEY = 1_048_576;

/** The form a message of the body is kept in: a progress notification without its progress token. */
export function storedEvent(message: JsonRpcMessage): JsonRpcMessage {
  if (!('method' in message) || message.method !== 'notifications/progress' || 'id' in message)
    return message;
  const params = message.params;
  if (typeof params !== 'object' || params === null || !('progressToken' in params)) return message;
  const { progressToken: _token, ...rest } = params as Record<string, unknown>;
  return { ...message, params: rest };
}

/** What one key's body has kept so far. */
export interface KeyedEventBudget {
  readonly keptBytes: number;
  /** Messages not kept (past the budget). Once one is dropped, every later one is too. */
  readonly dropped: number;
}

export const EMPTY_EVENT_BUDGET: KeyedEventBudget = { keptBytes: 0, dropped: 0 };

/** Whether the next message of the body is appended to the key's log, and the budget after it. */
export type KeyedEventAdmission =
  | { readonly kind: 'append'; readonly budget: KeyedEventBudget }
  | { readonly kind: 'drop'; readonly budget: KeyedEventBudget };

/**
 * The next message of the body (`bytes`: its stored form's size) against the key's budget. The final
 * response never comes here: the runtime records it in the memo (`isFinalAnswer`, `keyedBodyEndSteps`).
 */
export function admitKeyedEvent(
  budget: KeyedEventBudget,
  bytes: number,
  maxBytes: number,
): KeyedEventAdmission {
  if (budget.dropped > 0 || budget.keptBytes + bytes > maxBytes)
    return { kind: 'drop', budget: { ...budget, dropped: budget.dropped + 1 } };
  return { kind: 'append', budget: { ...budget, keptBytes: budget.keptBytes + bytes } };
}

/** The budget an application's setting gives: a whole number ≥ 0 of bytes, or the default. */
export function maxEventBytesPerKey(setting: number | undefined): number {
  return typeof setting === 'number' && Number.isFinite(setting) && setting >= 0
    ? Math.floor(setting)
    : DEFAULT_MAX_EVENT_BYTES_PER_KEY;
}

/** Any UTF-16 code unit past ASCII (surrogates included). */
const NON_ASCII = /[\u0080-\uffff]/;

/**
 * The UTF-8 size of a stored event's JSON, as the byte budget counts it (`admitKeyedEvent`). Counted here
 * rather than by a host's encoder, so the runtime and the simulated world measure alike.
 */
export function storedEventBytes(stored: JsonRpcMessage): number {
  const s = JSON.stringify(stored);
  // Most events are ASCII: one byte a character, found by one native scan instead of a loop in JS.
  if (!NON_ASCII.test(s)) return s.length;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      // A surrogate pair is one 4-byte character; a lone surrogate is encoded as U+FFFD (3 bytes).
      if (d >= 0xdc00 && d < 0xe000) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}
