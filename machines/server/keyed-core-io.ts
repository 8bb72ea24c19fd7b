import type { JsonRpcMessage } from '../jsonrpc.js';
import type { MemoEntry, MemoExpected } from './keyed-memo.js';
import type { KeyedRequestEvent } from './keyed-request.machine.js';

/**
 * The facts the keyed core (keyed-core.ts) is told and the commands it hands out: the whole surface
 * between the continuity extension's server decisions and any I/O (the Node runtime in src/server/keyed,
 * the simulated world in properties/worldModern). Plain data, so both hosts execute the same list.
 */

/** One store operation (the `MemoStore` / `EventLog` ports; the key's log is always stream `KEYED_STREAM`). */
export type KeyedStoreCall =
  /** → `MemoEntry | undefined` */
  | { readonly kind: 'memo.get'; readonly memoKey: string }
  /** → `MemoCreate` */
  | { readonly kind: 'memo.create'; readonly entry: MemoEntry; readonly max: number }
  /** → `MemoEntry | undefined`: the stored entry afterwards (compare-and-set on `expected`: state and run). */
  | { readonly kind: 'memo.replace'; readonly next: MemoEntry; readonly expected: MemoExpected }
  /** → `MemoEntry[]` */
  | { readonly kind: 'memo.running' }
  /** → `string[]`: the log ids of the entries deleted. */
  | { readonly kind: 'memo.sweep' }
  /** → nothing */
  | { readonly kind: 'memo.renew-lease'; readonly leaseMs: number }
  /** → `ReadonlySet<string>`: the owners holding a lease. */
  | { readonly kind: 'memo.alive'; readonly owners: readonly string[] }
  /** → `number` */
  | { readonly kind: 'memo.complete-for' }
  /** → `StreamWindow | undefined` */
  | { readonly kind: 'log.window'; readonly logId: string }
  /** → `{ window, events } | undefined` */
  | { readonly kind: 'log.read'; readonly logId: string; readonly afterSeq: number }
  /** → nothing */
  | { readonly kind: 'log.open'; readonly logId: string }
  /** → the seq */
  | { readonly kind: 'log.append'; readonly logId: string; readonly message: JsonRpcMessage }
  /** → the seq, or undefined when the log was finished already */
  | { readonly kind: 'log.append-final'; readonly logId: string; readonly message: JsonRpcMessage }
  /** → nothing */
  | { readonly kind: 'log.drop'; readonly logId: string };

/** A frame of a keyed response stream: a log event under its SSE id, an answer without one, or a keep-alive. */
export type KeyedSseFrame =
  | { readonly kind: 'event'; readonly id: string; readonly message: JsonRpcMessage }
  | { readonly kind: 'data'; readonly message: JsonRpcMessage }
  | { readonly kind: 'keep-alive' };

/** What the core is told. Every fact comes with the time it is handled at (`handle(fact, now)`). */
export type KeyedFact =
  /** A 2026 `tools/call` or cancel reached the server; `request` is the host's handle for its answer. */
  | {
      readonly kind: 'request';
      readonly request: number;
      readonly message: JsonRpcMessage;
      /** `undefined`: the server has no `authenticate` (every caller is one principal, bounded per address). */
      readonly principal: string | undefined;
      readonly address?: string;
    }
  /** A store operation the core asked for (`store` command `op`) answered. */
  | { readonly kind: 'store-answer'; readonly op: number; readonly value: unknown }
  /** A store operation failed (the store is down, a query threw). */
  | { readonly kind: 'store-failed'; readonly op: number; readonly error: unknown }
  /** The SDK answered a body run with this HTTP status. */
  | { readonly kind: 'body-response'; readonly run: number; readonly status: number }
  /** The SDK's refusal (`read-refusal`): its body (parsed JSON, if it was) and raw form for the attempt. */
  | {
      readonly kind: 'body-refusal';
      readonly run: number;
      readonly status: number;
      readonly body: unknown;
      readonly text: string;
      readonly headers: ReadonlyArray<readonly [string, string]>;
    }
  /** One JSON-RPC message of the SDK's response (`read-messages`), in order. */
  | { readonly kind: 'body-message'; readonly run: number; readonly message: JsonRpcMessage }
  /** The SDK's response ended (no more messages). */
  | { readonly kind: 'body-ended'; readonly run: number }
  /** The run threw, or its response broke. */
  | { readonly kind: 'body-failed'; readonly run: number; readonly error: unknown }
  /** The client's response stream of `request` closed (a transport fact: the body goes on). */
  | { readonly kind: 'stream-closed'; readonly request: number }
  /** Another instance changed a key's log (a hint: responses also poll). */
  | { readonly kind: 'log-changed'; readonly logId: string }
  /** The memo forgot an entry by itself (`MemoStore.onForget`): its log goes too. */
  | { readonly kind: 'forgotten'; readonly logId: string }
  /** Time passed (the host's one timer fired at or after `nextWakeAt()`). */
  | { readonly kind: 'tick' }
  /** The host stops: no more lease, sweep, or looks. */
  | { readonly kind: 'close' };

/** What the core can note without asking anything (metrics, traces, the model's coverage). */
export type KeyedNote =
  /** A body starts here for `request`'s message (an execution). */
  | {
      readonly kind: 'executed';
      readonly run: number;
      readonly entry: MemoEntry;
      readonly message: JsonRpcMessage;
    }
  /** A keyed request was answered with an error without attaching. */
  | { readonly kind: 'refused'; readonly code: number; readonly status: number }
  /** An attempt attached to a key; `run`: the execution it attached to, when it runs here. */
  | {
      readonly kind: 'attached';
      readonly request: number;
      readonly run: number | undefined;
      readonly message: JsonRpcMessage;
      readonly lastEventId: string | undefined;
      /** The entry attached to, and the log position its response starts after (for the inspector). */
      readonly entry: MemoEntry;
      readonly afterSeq: number;
    }
  /** A request refused at a bound. */
  | { readonly kind: 'limited'; readonly request: number; readonly reason: string; readonly status: number }
  /** How a keyed call's steps ended (`execute`, `serve`, `reply -32012`...). */
  | { readonly kind: 'plan'; readonly request: number; readonly plan: string; readonly entry?: MemoEntry }
  /** The machine's `event` was recorded over `before` (compare-and-set); `after`: what the memo holds now. */
  | {
      readonly kind: 'recorded';
      readonly before: MemoEntry;
      readonly event: KeyedRequestEvent;
      readonly watched: boolean;
      readonly after: MemoEntry | undefined;
    }
  /** A stored entry moved (a compare-and-set won). */
  | { readonly kind: 'state'; readonly from: string; readonly to: string }
  /** An attached response ended (`outcome`, `lost`...), and whether the outcome was a refusal. */
  | {
      readonly kind: 'attach-end';
      readonly request: number;
      readonly end: string;
      readonly refusal: boolean;
    };

/** What the core hands out; the host executes each, in order. */
export type KeyedCommand =
  /** Execute the store call; tell the answer as `store-answer` (or `store-failed`) with this `op`. */
  | { readonly kind: 'store'; readonly op: number; readonly call: KeyedStoreCall }
  /** Not keyed: the endpoint serves `request` as the spec says. */
  | { readonly kind: 'pass'; readonly request: number }
  /** Answer `request` with this status, headers and body (`null`: none). */
  | {
      readonly kind: 'answer';
      readonly request: number;
      readonly status: number;
      readonly headers: ReadonlyArray<readonly [string, string]>;
      readonly body: string | null;
    }
  /** Answer `request` with a 200 event stream (kept open until `end-stream`). */
  | { readonly kind: 'open-stream'; readonly request: number }
  | { readonly kind: 'write'; readonly request: number; readonly frame: KeyedSseFrame }
  | { readonly kind: 'end-stream'; readonly request: number }
  /** Run `message` on the SDK, detached from every client stream; tell `body-response` (or `body-failed`). */
  | {
      readonly kind: 'run-body';
      readonly run: number;
      /** The request whose attempt starts it (the host runs it on that request's SDK). */
      readonly request: number;
      readonly message: JsonRpcMessage;
    }
  /** Read the SDK's answer as a refusal: tell `body-refusal`. */
  | { readonly kind: 'read-refusal'; readonly run: number }
  /** Read the SDK's answer as messages: tell each `body-message`, then `body-ended` (or `body-failed`). */
  | { readonly kind: 'read-messages'; readonly run: number }
  /** Stop reading the run's answer (its final answer came, or its log failed): nothing more is wanted. */
  | { readonly kind: 'stop-reading'; readonly run: number }
  /** Abort the run (cancelled, or its entry is no longer running here). */
  | { readonly kind: 'abort-body'; readonly run: number }
  /** The run's answer is read (`final`: its final answer, if any): its trace ends. */
  | { readonly kind: 'body-over'; readonly run: number; readonly final: JsonRpcMessage | undefined }
  /** The run is entirely done here (its end stored or kept for a retry): drop what the host holds for it. */
  | { readonly kind: 'run-done'; readonly run: number }
  | { readonly kind: 'note'; readonly note: KeyedNote }
  /** An error the core met and answered for (never thrown to a client). */
  | { readonly kind: 'error'; readonly error: unknown };
