import type { JsonRpcRequest } from '../jsonrpc.js';
import type { NetworkFault } from './io.js';
import { STALL_PROGRESS_BYTES } from './limits.js';
import type { ModernCallEvent, ModernCallInput, ModernCallOutput, ToolHints } from './modern-call.machine.js';
import { keysCall, type ModernCallPolicy, type ModernCallStreamEnd } from './modern-call-decide.js';
import { answerShape, asMessage, endOfAnswer, libraryEnding } from './modern-call-wire.js';
import { progressStep } from './progress.js';

/**
 * The sans-I/O core of one MCP 2026-07-28 `tools/call` on the client: every decision the hosts used to make
 * on their own around `modernCallMachine`. Both hosts call it and execute what it says: the runtime
 * (`src/client/modern/continuity-fetch.ts`, `attempt-exchange.ts`: real fetch, real SSE parser) and the
 * simulated world (`properties/world-modern/client.ts`: the simulated network and virtual clock).
 *
 * - `callInput`: whether the call is keyed (`keysCall`) and the call machine's input.
 * - `attemptStep`: one I/O fact of an attempt (headers, bytes, an SSE event, an answer, an end, a failure)
 *   → the call machine's events: how an answer is read, how a failure is named (refused, cut before the
 *   response, cut mid-stream), and the progress rule (bytes that complete nothing prove life only every
 *   `STALL_PROGRESS_BYTES`).
 * - `callEnding`: how the finished call is handed to the HTTP library that sent it (abort overriding the
 *   machine's output, the raw answer, the fetch error, or the final message).
 *
 * `CallCoreRules` are the decisions it reads, a parameter so the simulated world can run a deliberately
 * wrong one (properties/mutants-modern.ts); the runtime always runs `CALL_CORE_RULES`.
 */

/** What the host knows when a call starts: the route facts. */
export interface CallRoute {
  /** The application's request as it sent it. */
  readonly request: JsonRpcRequest;
  /** The tool's hints from `tools/list`, if listed. */
  readonly tool?: ToolHints;
  /** The extension's settings learnt from `server/discover` (undefined: not advertised, not learnt). */
  readonly extension?: { readonly memoWindowMs: number };
  /** The application lets the client use the extension (`continuityFetch`'s `useExtension`). */
  readonly useExtension: boolean;
  readonly policy: ModernCallPolicy;
  /** Makes the call's idempotency key: asked only when the call is keyed. */
  readonly newKey: () => string;
  readonly stallTimeoutMs: number;
  /** When the first attempt is sent, on the clock of the events' `at`. */
  readonly startedAt: number;
  readonly jitterSeed: number;
}

/** The decisions the core reads. */
export interface CallCoreRules {
  /** Whether a call carries an idempotency key (the runtime's: `keysCall`). */
  readonly keysCall: typeof keysCall;
  /** How a network failure of an attempt is named, knowing whether response bytes arrived. */
  readonly failureEnd: (fault: NetworkFault, responded: boolean) => ModernCallStreamEnd;
  /** Bytes that complete no unit restart the stall timer once this many have arrived. */
  readonly progressBytes: number;
  /** How the finished call reaches the library (see `callEnding`). */
  readonly libraryEnding: typeof libraryEnding;
}

/**
 * A failure is `refused` only when no response byte arrived and the connection provably never opened
 * (machines/client/faults.ts); after response bytes it is a cut mid-stream, before them a cut before the
 * response (the request may have been received and run).
 */
export function failureEnd(fault: NetworkFault, responded: boolean): ModernCallStreamEnd {
  if (responded) return { kind: 'cut-mid-stream' };
  return fault === 'refused' ? { kind: 'refused' } : { kind: 'cut-before-response' };
}

export const CALL_CORE_RULES: CallCoreRules = {
  keysCall,
  failureEnd,
  progressBytes: STALL_PROGRESS_BYTES,
  libraryEnding,
};

/** Whether the call goes through the extension with a key. */
export function callIsKeyed(route: CallRoute, rules: CallCoreRules = CALL_CORE_RULES): boolean {
  return rules.keysCall(route.tool, route.useExtension ? route.extension : undefined, route.policy);
}

/** The call machine's input: keyed calls carry the extension's settings and a new key; others neither. */
export function callInput(route: CallRoute, rules: CallCoreRules = CALL_CORE_RULES): ModernCallInput {
  const keyed = callIsKeyed(route, rules);
  return {
    request: route.request,
    tool: route.tool,
    extension: keyed ? route.extension : undefined,
    idempotencyKey: keyed ? route.newKey() : undefined,
    policy: route.policy,
    stallTimeoutMs: route.stallTimeoutMs,
    startedAt: route.startedAt,
    jitterSeed: route.jitterSeed,
  };
}

/** What the host observed of one attempt, in the order it observed it. */
export type AttemptFact =
  /** The response's status line and headers arrived (any status). */
  | { readonly kind: 'headers' }
  /** Body bytes arrived; `completed`: they completed a unit (an SSE event, a comment, a `retry:`). */
  | { readonly kind: 'bytes'; readonly bytes: number; readonly completed: boolean }
  /** A complete unit that carries no message: a comment (keep-alive), a `retry:` field. */
  | { readonly kind: 'keep-alive' }
  /** One SSE event: its data parsed as JSON (`parseBody`), its `event:` type and `id:`. */
  | { readonly kind: 'event'; readonly data: unknown; readonly event?: string; readonly eventId?: string }
  /** A whole answer that is not an event stream: status, type, parsed body, `Retry-After`, the wall clock. */
  | {
      readonly kind: 'answer';
      readonly status: number;
      readonly contentType: string | null;
      readonly body: unknown;
      readonly retryAfter: string | null;
      readonly wallMs: number;
    }
  /** The event stream ended cleanly. */
  | { readonly kind: 'ended' }
  /** A message or body passed the byte cap: the host stopped reading. */
  | { readonly kind: 'over-cap' }
  /** The connection failed (fetch threw, or the body broke off). */
  | { readonly kind: 'failed'; readonly fault: NetworkFault };

/** What the core remembers of one attempt. */
export interface AttemptState {
  /** Response bytes (headers included) arrived. */
  readonly responded: boolean;
  /** Bytes since the last complete unit (the progress rule). */
  readonly partial: number;
}

export const ATTEMPT_START: AttemptState = { responded: false, partial: 0 };

export interface AttemptStep {
  readonly state: AttemptState;
  /** The call machine's events, in order. */
  readonly events: readonly ModernCallEvent[];
  /** This answer ended the attempt without a message: the host keeps it for a `raw-answer` ending. */
  readonly keepRaw?: true;
}

/** Whether an answer of this status and type is read as an event stream (else as one body). */
export function readsAsEvents(status: number, contentType: string | null): boolean {
  return answerShape(status, contentType) === 'event-stream';
}

/** One fact of an attempt at time `at` → the call machine's events. Pure. */
export function attemptStep(
  state: AttemptState,
  fact: AttemptFact,
  at: number,
  rules: CallCoreRules = CALL_CORE_RULES,
): AttemptStep {
  const activity: ModernCallEvent = { type: 'attempt.activity', at };
  const ended = (end: ModernCallStreamEnd): ModernCallEvent => ({ type: 'attempt.ended', at, end });
  switch (fact.kind) {
    case 'headers':
      return { state: { ...state, responded: true }, events: [activity] };
    case 'bytes': {
      // A large unit arriving steadily is alive although nothing completes; a trickle is not (progress.ts).
      const { partial, alive } = progressStep(state.partial, fact.bytes, fact.completed, rules.progressBytes);
      return { state: { responded: true, partial }, events: alive ? [activity] : [] };
    }
    case 'keep-alive':
      return { state: { responded: true, partial: 0 }, events: [activity] };
    case 'event': {
      const next = { responded: true, partial: 0 };
      // Only `message` events carry JSON-RPC; data that is not a message is neither for the application
      // nor an answer, but a complete unit all the same.
      const message = fact.event === undefined || fact.event === 'message' ? asMessage(fact.data) : undefined;
      if (!message) return { state: next, events: [activity] };
      return {
        state: next,
        events: [
          {
            type: 'attempt.message',
            at,
            message,
            ...(fact.eventId !== undefined && fact.eventId !== '' ? { eventId: fact.eventId } : {}),
          },
        ],
      };
    }
    case 'answer': {
      const next = { responded: true, partial: 0 };
      // A JSON body that is a JSON-RPC message is a message like any other (the machine tells the call's
      // own answer from the rest), and the attempt ends with it.
      const message =
        answerShape(fact.status, fact.contentType) === 'json' ? asMessage(fact.body) : undefined;
      if (message)
        return {
          state: next,
          events: [{ type: 'attempt.message', at, message }, ended({ kind: 'ended-without-answer' })],
        };
      return {
        state: next,
        events: [ended(endOfAnswer(fact.status, fact.body, fact.retryAfter, fact.wallMs))],
        keepRaw: true,
      };
    }
    case 'ended':
      return { state, events: [ended({ kind: 'ended-without-answer' })] };
    case 'over-cap':
      // Reading stopped at the cap: the answer is lost after bytes of it arrived, a cut.
      return { state, events: [ended({ kind: 'cut-mid-stream' })] };
    case 'failed':
      return { state, events: [ended(rules.failureEnd(fact.fault, state.responded))] };
  }
}

/** A body or event data as JSON; text that is not JSON as itself; nothing as undefined. */
export function parseBody(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * How the finished call reaches the HTTP library that sent it as one POST:
 * - `abort`: the application aborted it: the library gets its own abort reason, whatever the machine ended
 *   with (it asked to stop hearing of the call);
 * - `raw-answer` / `fetch-error` / `final`: as `libraryEnding` says, `raw-answer` only when an answer was
 *   kept and `fetch-error` only when a fetch error was (else `final`).
 */
export type CallEnding = 'abort' | 'raw-answer' | 'fetch-error' | 'final';

export function callEnding(
  out: ModernCallOutput,
  facts: {
    readonly aborted: boolean;
    readonly streamOpen: boolean;
    readonly rawAnswer: boolean;
    readonly fetchError: boolean;
  },
  rules: CallCoreRules = CALL_CORE_RULES,
): CallEnding {
  if (facts.aborted) return 'abort';
  const ending = rules.libraryEnding(
    out.outcome,
    out.outcome === 'failed' ? out.end : undefined,
    facts.streamOpen,
  );
  if (ending === 'raw-answer') return facts.rawAnswer ? ending : 'final';
  if (ending === 'fetch-error') return facts.fetchError ? ending : 'final';
  return ending;
}
