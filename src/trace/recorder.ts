import { appendFileSync, existsSync, renameSync, rmSync, statSync } from 'node:fs';
import type { AnyActorRef, InspectionEvent, Observer } from 'xstate';
import { encode } from './codec.js';
import type { EventReceived, TraceRecord } from './record.js';

export interface TraceOptions {
  /** The trace file (JSON Lines). Older parts rotate to `<path>.1`, `<path>.2`, … */
  readonly path: string;
  /** A part rotates once it holds this many bytes. Default 16 MiB. */
  readonly maxBytes?: number;
  /** Rotated parts kept besides the current one; older ones are deleted. Default 2. */
  readonly keep?: number;
  /**
   * Credentials (`Authorization`, cookies) and payloads (tool arguments and results) written as
   * `[redacted]`. Default true: what the machines decided on (ids, methods, statuses, event ids, error
   * codes and reasons) is always kept.
   */
  readonly redact?: boolean;
  /** Injectable clock (tests). Default `performance.now`. */
  readonly now?: () => number;
}

/** A trace being written: pass `inspect` where the transport or server takes one; `close()` when done. */
export interface Trace {
  readonly inspect: Observer<InspectionEvent>;
  /** Writes what is buffered now. */
  flush(): void;
  /** Flushes and stops recording. */
  close(): void;
}

/**
 * Records the machines of a client, a `continuityFetch` or a server into a bounded, rotating JSON Lines
 * file: each actor's start (with the snapshot a replay starts from), every event it receives (the wire
 * facts: statuses, event ids, cuts, with their times) and every state it reaches with its decision.
 * `mcp-continuity explain <file>` tells how each call and stream ended and why; `mcp-continuity replay
 * <file>` runs the recorded events through today's machines and flags any decision that differs.
 *
 * Inspection runs inside the machines' own step, so recording never throws into it: lines are buffered and
 * written once per turn of the event loop (`setImmediate`), and a failing disk stops the trace, not the
 * application.
 */
export function createTrace(options: TraceOptions): Trace {
  const maxBytes = options.maxBytes ?? 16 * 1024 * 1024;
  const keep = options.keep ?? 2;
  const now = options.now ?? (() => performance.now());
  const redact = options.redact !== false;
  const start = now();
  const t = () => Math.round((now() - start) * 1000) / 1000;
  let buffer: string[] = [];
  let scheduled = false;
  let closed = false;
  let bytes = existsSync(options.path) ? statSync(options.path).size : 0;
  const started = new Set<string>();

  const rotate = () => {
    for (let n = keep; n >= 1; n--) {
      const from = n === 1 ? options.path : `${options.path}.${n - 1}`;
      const to = `${options.path}.${n}`;
      if (!existsSync(from)) continue;
      if (n === keep && existsSync(to)) rmSync(to);
      renameSync(from, to);
    }
    if (keep === 0) rmSync(options.path, { force: true });
    bytes = 0;
  };

  const flush = () => {
    scheduled = false;
    if (buffer.length === 0) return;
    const lines = buffer;
    buffer = [];
    try {
      for (const line of lines) {
        if (bytes > 0 && bytes + line.length > maxBytes) rotate();
        appendFileSync(options.path, line);
        bytes += Buffer.byteLength(line);
      }
    } catch {
      // The disk failed: the application goes on, the trace stops.
      closed = true;
    }
  };

  const write = (record: TraceRecord) => {
    if (closed) return;
    buffer.push(`${JSON.stringify(record)}\n`);
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };

  const machineOf = (ref: AnyActorRef): string | undefined => {
    const logic = (ref as { logic?: { id?: unknown; config?: unknown } }).logic;
    return logic && typeof logic.id === 'string' && logic.config !== undefined ? logic.id : undefined;
  };

  const inspect: Observer<InspectionEvent> = {
    next: (event) => {
      if (closed) return;
      try {
        const ref = event.actorRef as AnyActorRef;
        if (event.type === '@xstate.actor') {
          const parent = (ref as { _parent?: AnyActorRef })._parent;
          write({
            k: 'actor',
            t: t(),
            a: ref.sessionId,
            id: ref.id,
            ...(machineOf(ref) ? { machine: machineOf(ref) } : {}),
            ...(parent ? { parent: parent.sessionId } : {}),
          });
          return;
        }
        if (event.type === '@xstate.event') {
          write({
            k: 'event',
            t: t(),
            a: ref.sessionId,
            ...(event.sourceRef ? { from: event.sourceRef.sessionId } : {}),
            e: encode(event.event, { redact }) as EventReceived['e'],
          });
          return;
        }
        if (event.type === '@xstate.action') {
          const action = event.action as { type?: unknown; params?: unknown };
          // The machines' own bookkeeping is left out; what they emit (a keyed body started) is a fact.
          if (typeof action.type !== 'string') return;
          if (action.type.startsWith('xstate.') && action.type !== 'xstate.emit') return;
          write({
            k: 'action',
            t: t(),
            a: ref.sessionId,
            action: action.type,
            ...(action.params !== undefined ? { params: encode(action.params, { redact }) } : {}),
          });
          return;
        }
        if (event.type === '@xstate.snapshot') {
          const snapshot = event.snapshot as {
            value?: unknown;
            status?: string;
            output?: unknown;
            context?: { decision?: unknown };
          };
          if (machineOf(ref) === undefined) return;
          if (!started.has(ref.sessionId)) {
            // The first snapshot is where a replay starts (entry actions already run, children invoked).
            started.add(ref.sessionId);
            write({
              k: 'start',
              t: t(),
              a: ref.sessionId,
              snapshot: encode(ref.getPersistedSnapshot(), { redact }),
            });
          }
          write({
            k: 'state',
            t: t(),
            a: ref.sessionId,
            value: snapshot.value,
            status: snapshot.status ?? 'active',
            after: event.event.type,
            ...(snapshot.context?.decision !== undefined
              ? { decision: encode(snapshot.context.decision, { redact }) }
              : {}),
            ...(snapshot.status === 'done' ? { output: encode(snapshot.output, { redact }) } : {}),
          });
        }
      } catch {
        // A value the trace cannot encode is left out; the machines go on.
      }
    },
  };

  return {
    inspect,
    flush,
    close() {
      flush();
      closed = true;
    },
  };
}
