import { STANDALONE_STREAM } from '../event-id.js';
import { forgotten } from './request-memory.js';

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
