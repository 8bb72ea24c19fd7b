import { JsonRpcCode } from '../codes.js';
import { STANDALONE_STREAM } from '../event-id.js';
import { idFromKey, type JsonRpcMessage } from '../jsonrpc.js';
import { forgetPoint, forgotten } from './request-memory.js';

/**
 * How a session's record is laid out in a shared store (Redis), so that what a decision writes, and what
 * an instance reads to catch up, does not grow with the session's age (issue 29).
 *
 * The session machine's snapshot remembers every stream it numbered (`context.streams`) and every request
 * id it admitted (`context.requests`, which is `streams` read backwards). Written whole, the record grew
 * by ~120 B per call and was rewritten on every call. Instead the record keeps a *core*: the snapshot
 * with both maps empty, a few hundred bytes whatever the age. Each stream is its own *entry* beside it,
 * keyed by its number, written once by the decision that numbered it. The request-id memory is rebuilt
 * from the entries (a request stream names its request), so it is never stored twice.
 *
 * The rules every instance follows:
 *
 * - **What a decision writes.** Only the streams numbered since the version it was made on (numbers from
 *   the base's `nextStream` on, and the standalone stream if it is new), and the core, over exactly that
 *   version (one script: compare the version, write core and entries, and open each entry's stream in the
 *   log, so a stream exists there as soon as its number does). A decision that cannot be written as such a
 *   delta (numbering went back: a log reset, which our server never does) rewrites the record.
 * - **What is forgotten.** The request-id memory is bounded (machines/server/request-memory.ts): a commit
 *   that moves the forget point deletes the entries below it, and a load or catch-up drops any left.
 * - **What a decision reads first.** Nothing: it is made on the instance's copy, and the write above is
 *   its check. A decision that changed nothing shared is confirmed against the copy's version instead
 *   (compare and touch). One round trip either way; only a refused one reads (below) and decides again.
 * - **What another instance may see, and when.** Nothing of a decision before its commit returned: until
 *   then the decision is the deciding instance's alone, and its stream numbers are not used. After it,
 *   every instance sees the decision at its next decision (each compares the stored version first) or
 *   sooner, when the change report reaches it.
 * - **What an instance does on a conflict.** Its commit found a newer version: the decision is discarded
 *   with the entries it numbered (numbers from its base's `nextStream` on, and a standalone stream it
 *   opened in it), it reads the newer core and only the entries numbered since its base (`entriesToRead`),
 *   merges them into what it had (`mergeSnapshot`) and decides again. A loser reads what changed, never
 *   the session's whole history.
 */

/** One stream the machine numbered: a request's stream (naming its request and owner) or the standalone one. */
export interface StreamEntry {
  readonly kind: 'request' | 'standalone';
  readonly requestKey?: string;
  readonly owner?: string;
}

/** The parts of the session machine's persisted snapshot this layout reads. */
interface SnapshotShape {
  readonly context: {
    readonly nextStream: number;
    readonly forgottenBelow?: number;
    readonly streams: Readonly<Record<number, StreamEntry>>;
    readonly requests: Readonly<Record<string, number>>;
  };
}

/** How far a snapshot's numbering went: what a delta is taken against. */
export interface Watermark {
  /** The next stream number the machine would give. */
  readonly nextStream: number;
  /** The standalone stream is registered. */
  readonly standalone: boolean;
  /**
   * Streams below this are forgotten (machines/server/request-memory.ts): a commit deletes their
   * entries, so what is stored beside the core stays bounded too. Absent: 1.
   */
  readonly forgottenBelow?: number;
}

const contextOf = (snapshot: unknown): SnapshotShape['context'] => (snapshot as SnapshotShape).context;

export function watermarkOf(snapshot: unknown): Watermark {
  const c = contextOf(snapshot);
  return {
    nextStream: c.nextStream,
    standalone: c.streams[STANDALONE_STREAM] !== undefined,
    forgottenBelow: c.forgottenBelow ?? 1,
  };
}

/** The snapshot without its per-stream memory: what the record itself holds. */
export function coreOf(snapshot: unknown): unknown {
  const s = snapshot as SnapshotShape;
  return { ...s, context: { ...s.context, streams: {}, requests: {} } };
}

/**
 * The entries a decision made on `base` adds, or undefined when its snapshot is not `base` plus new
 * entries (numbering went back): then the whole record is rewritten.
 */
export function newEntries(base: Watermark, snapshot: unknown): Array<[number, StreamEntry]> | undefined {
  const c = contextOf(snapshot);
  const standalone = c.streams[STANDALONE_STREAM];
  if (c.nextStream < base.nextStream || (base.standalone && standalone === undefined)) return undefined;
  const out: Array<[number, StreamEntry]> = [];
  if (standalone !== undefined && !base.standalone) out.push([STANDALONE_STREAM, standalone]);
  for (let n = Math.max(base.nextStream, STANDALONE_STREAM + 1); n < c.nextStream; n++) {
    const entry = c.streams[n];
    if (entry !== undefined) out.push([n, entry]);
  }
  return out;
}

/**
 * The stream numbers an instance whose copy is at `base` reads to catch up with a stored core whose
 * numbering is at `stored`: the ones numbered since, and the standalone stream if it is new to it.
 */
export function entriesToRead(base: Watermark, stored: Watermark): number[] {
  const out: number[] = [];
  if (stored.standalone && !base.standalone) out.push(STANDALONE_STREAM);
  for (let n = Math.max(base.nextStream, STANDALONE_STREAM + 1); n < stored.nextStream; n++) out.push(n);
  return out;
}

/** Adds `entries` to `streams` and `requests` (a request stream names its request). */
function addEntries(
  streams: Record<number, StreamEntry>,
  requests: Record<string, number>,
  entries: Iterable<readonly [number, StreamEntry]>,
  forgottenBelow: number,
): void {
  for (const [n, entry] of entries) {
    if (forgotten(n, forgottenBelow)) continue;
    streams[n] = entry;
    if (entry.kind === 'request' && entry.requestKey !== undefined) requests[entry.requestKey] = n;
  }
}

/** A whole snapshot from a core and every entry stored beside it (a new process, or a first load). */
export function joinSnapshot(core: unknown, entries: Iterable<readonly [number, StreamEntry]>): unknown {
  const s = core as SnapshotShape;
  const streams: Record<number, StreamEntry> = {};
  const requests: Record<string, number> = {};
  addEntries(streams, requests, entries, s.context.forgottenBelow ?? 1);
  return { ...s, context: { ...s.context, streams, requests } };
}

/**
 * Catching up after a conflict or another instance's change: the stored `core`, with what this instance
 * held at `base` (its own undecided entries dropped: numbers from `base.nextStream` on, and a standalone
 * stream `base` did not have) and the `entries` numbered since (`entriesToRead`).
 */
export function mergeSnapshot(
  local: unknown,
  base: Watermark,
  core: unknown,
  entries: Iterable<readonly [number, StreamEntry]>,
): unknown {
  const held = contextOf(local);
  const s = core as SnapshotShape;
  const floor = s.context.forgottenBelow ?? 1;
  const kept = (n: number): boolean =>
    n === STANDALONE_STREAM ? base.standalone : n < base.nextStream && !forgotten(n, floor);
  const streams: Record<number, StreamEntry> = {};
  const requests: Record<string, number> = {};
  for (const key of Object.keys(held.streams)) {
    const n = Number(key);
    const entry = held.streams[n];
    if (entry !== undefined && kept(n)) streams[n] = entry;
  }
  for (const [key, n] of Object.entries(held.requests)) if (kept(n)) requests[key] = n;
  addEntries(streams, requests, entries, floor);
  return { ...s, context: { ...s.context, streams, requests } };
}

/**
 * Admissions commute (issue 29: instances that do not take turns). Two instances admitting different
 * requests of one session at once both number a stream `nextStream`; with plain fencing the later commit
 * loses, reads what changed and decides again: with a round-robin balancer, on every call. A decision that
 * only *admitted* requests is instead rebased by the store, in the step that found the newer version:
 *
 * - **When.** The decision numbered only request streams, changed no other shared fact (`settledFacts`
 *   of its snapshot is its base's), and the stored record since its base did the same (its settled facts
 *   and standalone flag are the decision's, it is stored as a core with entries), and at most
 *   `REBASE_SPAN` streams were numbered since its base. Otherwise: the plain conflict above.
 * - **Duplicates.** No stream numbered since the base names a request the decision admitted (the same
 *   request id sent to two instances at once): then the plain conflict, and the loser, deciding again,
 *   finds it a duplicate: one run.
 * - **Numbers.** The decision's entries move past the stored numbering, in order (`rebaseEntries`); the
 *   forget point follows the new numbering (`forgetPoint`). The stored core is kept: its `nextStream` and
 *   `forgottenBelow` are the store's numbering fields (`numberedCore` puts them back on load).
 * - **The decider.** It is told the numbering it was rebased onto and the entries numbered since its base,
 *   merges them into its copy as a catch-up does, makes the decision again there, and finds it numbered
 *   exactly the rebased entries (the machine numbers from `nextStream`, as the store did): nothing more is
 *   written. A loser reads only the other instance's few new entries, in the same round trip.
 */
export const REBASE_SPAN = 1_024;

/** The shared facts of a snapshot apart from its numbering: what a rebase requires unchanged. */
export function settledFacts(snapshot: unknown): string {
  const s = snapshot as { value?: unknown; context: { epoch?: string; standaloneOpened?: boolean } };
  const ended = typeof s.value === 'object' && s.value !== null && 'ended' in s.value;
  return `${s.context.epoch}|${s.context.standaloneOpened === true}|${ended}`;
}

/** A stored record's numbering, kept beside its core (the core's own copy may be behind it). */
export interface Numbering {
  readonly nextStream: number;
  readonly forgottenBelow: number;
}

/** `core` with the store's numbering put back (a rebase moved it without rewriting the core). */
export function numberedCore(core: unknown, numbering: Numbering | undefined): unknown {
  const s = core as SnapshotShape;
  if (
    numbering === undefined ||
    (s.context.nextStream === numbering.nextStream &&
      (s.context.forgottenBelow ?? 1) === numbering.forgottenBelow)
  ) {
    return core;
  }
  return {
    ...s,
    context: { ...s.context, nextStream: numbering.nextStream, forgottenBelow: numbering.forgottenBelow },
  };
}

/** A decision's entries moved from numbering at `from` to numbering at `to`, in order. */
export function rebaseEntries(
  entries: ReadonlyArray<readonly [number, StreamEntry]>,
  from: number,
  to: number,
): Array<[number, StreamEntry]> {
  return entries.map(([n, entry]) => [n - from + to, entry]);
}

/** What a decision asks the store when its version is no longer the stored one. */
export interface RebaseAsk {
  readonly base: Watermark;
  readonly entries: ReadonlyArray<readonly [number, StreamEntry]>;
  readonly watermark: Watermark;
  /** `settledFacts` of the decision's snapshot. */
  readonly facts: string;
  /** The request memory's capacity (`forgetPoint`). */
  readonly capacity: number;
}

/** What the store holds when the ask arrives. */
export interface RebaseStored {
  readonly numbering: Numbering;
  readonly standalone: boolean;
  /** `settledFacts` of the stored core; undefined when it was not stored as a core with entries. */
  readonly facts: string | undefined;
  /** The stored entries numbered from the ask's base on (`entriesToRead`). */
  readonly since: ReadonlyArray<readonly [number, StreamEntry]>;
}

/**
 * The store's rule for a rebase (the Redis script and any simulated store follow it): the entries to write
 * and the new numbering, or undefined for a plain conflict.
 */
export function rebaseAdmissions(
  ask: RebaseAsk,
  stored: RebaseStored,
): { entries: Array<[number, StreamEntry]>; numbering: Numbering } | undefined {
  const from = ask.base.nextStream;
  const to = stored.numbering.nextStream;
  if (stored.facts === undefined || stored.facts !== ask.facts) return undefined;
  if (stored.standalone !== ask.watermark.standalone || ask.base.standalone !== ask.watermark.standalone) {
    return undefined;
  }
  if (to < from || to - from > REBASE_SPAN) return undefined;
  if (ask.entries.some(([n, e]) => e.kind !== 'request' || n < from)) return undefined;
  const admitted = new Set(ask.entries.map(([, e]) => e.requestKey));
  if (stored.since.some(([, e]) => e.kind === 'request' && admitted.has(e.requestKey))) return undefined;
  const nextStream = ask.watermark.nextStream - from + to;
  return {
    entries: rebaseEntries(ask.entries, from, to),
    numbering: {
      nextStream,
      forgottenBelow: forgetPoint(nextStream, stored.numbering.forgottenBelow, ask.capacity),
    },
  };
}

/** The message of the answer a rebased request that no instance runs gets (`unrunRebased`). */
export const NOT_RUN_MESSAGE =
  'The request was not run: the server could not admit it after a conflicting change; send it again with a new id';

/**
 * A rebase the decider could not make again as the store wrote it (never expected: the machine numbers
 * from `nextStream` as the store does). The store has admitted the decision's requests (`written`: the
 * rebased entries), but the decision that would run them is discarded before anything ran, so no
 * instance runs them, and deciding again finds them admitted: the client would be attached to a stream
 * nobody answers. Each request gets a definite answer instead, written as its stream's final event
 * before the decision is made again (which then hands the client that answer): it did not run.
 */
export function unrunRebased(
  written: ReadonlyArray<readonly [number, StreamEntry]>,
): Array<{ stream: number; answer: JsonRpcMessage }> {
  const out: Array<{ stream: number; answer: JsonRpcMessage }> = [];
  for (const [stream, entry] of written) {
    if (entry.kind !== 'request' || entry.requestKey === undefined) continue;
    const error = { code: JsonRpcCode.INTERNAL_ERROR, message: NOT_RUN_MESSAGE, data: { reason: 'not_run' } };
    out.push({ stream, answer: { jsonrpc: '2.0', id: idFromKey(entry.requestKey), error } });
  }
  return out;
}
