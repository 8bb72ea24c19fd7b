import type { JsonRpcMessage, JsonRpcRequest } from '../jsonrpc.js';
import { type CoreContext, driveSteps, logBell, record, startBell } from './keyed-core-context.js';
import type { KeyedFact } from './keyed-core-io.js';
import {
  admitKeyedEvent,
  EMPTY_EVENT_BUDGET,
  type KeyedEventBudget,
  storedEvent,
  storedEventBytes,
} from './keyed-events.js';
import type { KeyedBodyEndCommand } from './keyed-execute.js';
import type { MemoEntry } from './keyed-memo.js';
import { isFinalAnswer, refusalResponse } from './keyed-plan.js';
import type { Task } from './keyed-tasks.js';

/**
 * The bodies the keyed core (keyed-core.ts) runs here: each run's messages kept in the key's log within
 * its byte budget, in order; its end stored (`keyedBodyEndSteps`) once its appends drained, and kept for
 * the lease tick to store again when the store failed; the starting attempt told when the SDK answered.
 * Pure: the host runs the SDK and tells each message.
 */

/** Who starts a body: the request, and its address when there is no `authenticate`. */
export interface BodyCaller {
  readonly request: number;
  readonly address: string | undefined;
}
type Caller = BodyCaller;

/** A body run here. */
export interface Run {
  readonly id: number;
  readonly entry: MemoEntry;
  readonly message: JsonRpcRequest;
  readonly address: string | undefined;
  budget: KeyedEventBudget;
  /** The seq of its last append: the run is its log's only writer, and the log was new when it started. */
  head: number;
  readonly queue: JsonRpcMessage[];
  appending: boolean;
  /** No more messages are read (its final answer came, it ended, or its log failed). */
  stopped: boolean;
  /** Everything read: the end is stored once the appends drained. */
  ending: boolean;
  over: boolean;
  aborted: boolean;
  final: JsonRpcMessage | undefined;
  refused: boolean;
  refusal: { status: number; text: string; headers: ReadonlyArray<readonly [string, string]> } | undefined;
  /** What the starting attempt answers: set once the SDK answered (`refusal`: its refusal, stored). */
  acceptance: { readonly refusal: Run['refusal'] } | undefined;
}

export class KeyedBodies {
  private readonly runs = new Map<number, Run>();
  /** Bodies running here, by memo key. */
  private readonly local = new Map<string, Run>();
  /**
   * Bodies that ended here but whose end could not be stored: their entry would stay `running` under this
   * instance's live lease for ever. The lease tick stores their end again, with the answer they got.
   */
  private readonly unstored = new Map<
    string,
    { entry: MemoEntry; final: JsonRpcMessage | undefined; refused: boolean; head: number }
  >();
  private nextRun = 1;

  constructor(private readonly ctx: CoreContext) {}

  /** Bodies running here now. */
  get count(): number {
    return this.local.size;
  }

  /** The run of `memoKey` here, if one runs. */
  runOf(memoKey: string): number | undefined {
    return this.local.get(memoKey)?.id;
  }

  /** The memo keys of the bodies running here. */
  keys(): string[] {
    return [...this.local.keys()];
  }

  /** A fact about a body: the SDK's answer, its messages, its end. */
  handle(
    fact: Extract<
      KeyedFact,
      { kind: 'body-response' | 'body-refusal' | 'body-message' | 'body-ended' | 'body-failed' }
    >,
  ): void {
    switch (fact.kind) {
      case 'body-response':
        this.bodyResponse(fact.run, fact.status);
        return;
      case 'body-refusal': {
        const run = this.runs.get(fact.run);
        if (!run || run.stopped) return;
        run.final = refusalResponse(fact.status, fact.body, run.message.id);
        run.refused = true;
        run.refusal = { status: fact.status, text: fact.text, headers: fact.headers };
        run.stopped = true;
        this.bodyOver(run);
        return;
      }
      case 'body-message':
        this.bodyMessage(fact.run, fact.message);
        return;
      case 'body-ended': {
        const run = this.runs.get(fact.run);
        if (!run || run.stopped) return;
        run.stopped = true;
        this.bodyOver(run);
        return;
      }
      case 'body-failed': {
        const run = this.runs.get(fact.run);
        // After `stop-reading`, a broken read is the host letting go: nothing to report.
        if (!run || run.stopped) return;
        if (!run.aborted) this.ctx.fail(fact.error);
        run.stopped = true;
        this.bodyOver(run);
        return;
      }
    }
  }

  /** Stores again the ends the store failed to take (the lease tick). */
  *storeUnstored(): Task {
    for (const { entry, final, refused, head } of [...this.unstored.values()])
      yield* this.storeEnd(entry, final, refused, head);
  }

  /** Starts a body for `caller`'s attempt (its entry was just created or restarted here). */
  start(entry: MemoEntry, message: JsonRpcRequest, caller: Caller): Run {
    const run: Run = {
      id: this.nextRun++,
      entry,
      message,
      address: caller.address,
      budget: EMPTY_EVENT_BUDGET,
      head: 0,
      queue: [],
      appending: false,
      stopped: false,
      ending: false,
      over: false,
      aborted: false,
      final: undefined,
      refused: false,
      refusal: undefined,
      acceptance: undefined,
    };
    this.runs.set(run.id, run);
    this.local.set(entry.memoKey, run);
    this.ctx.note({ kind: 'executed', run: run.id, entry, message });
    this.ctx.emit({ kind: 'run-body', run: run.id, request: caller.request, message });
    return run;
  }

  bodyResponse(id: number, status: number): void {
    const run = this.runs.get(id);
    if (!run || run.stopped) return;
    // Nothing ran: read as a refusal, recorded `refused` (a re-issue of the key runs).
    if (this.ctx.d.refusedBeforeRun(status)) {
      this.ctx.emit({ kind: 'read-refusal', run: id });
      return;
    }
    this.accept(run, undefined);
    this.ctx.emit({ kind: 'read-messages', run: id });
  }

  /** The starting attempt may go on: served from the log, or answered with the stored refusal. */
  private accept(run: Run, refusal: Run['refusal']): void {
    if (run.acceptance) return;
    run.acceptance = { refusal };
    this.ctx.tasks.ring(startBell(run.id));
  }

  /** One message of the body: its final answer, or an event kept within the key's byte budget. */
  bodyMessage(id: number, message: JsonRpcMessage): void {
    const run = this.runs.get(id);
    if (!run || run.stopped) return;
    if (isFinalAnswer(message, run.message.id)) {
      run.final = message;
      run.stopped = true;
      this.ctx.emit({ kind: 'stop-reading', run: id });
      this.bodyOver(run);
      return;
    }
    const stored = storedEvent(message);
    const admission = admitKeyedEvent(
      run.budget,
      storedEventBytes(stored),
      this.ctx.limits.maxEventBytesPerKey,
    );
    run.budget = admission.budget;
    if (admission.kind === 'drop') return;
    run.queue.push(stored);
    if (!run.appending) {
      run.appending = true;
      this.ctx.tasks.spawn(this.appendTask(run), () => {
        run.appending = false;
        if (run.ending) this.finish(run);
      });
    }
  }

  /** Appends the body's kept messages in order; a failed append ends the run without an answer. */
  private *appendTask(run: Run): Task {
    // Taken a batch at a time, not `shift`ed: a body sending faster than the log appends queues up to
    // the key's event bound here, and `shift` costs time in the queue's length.
    for (let batch = run.queue.splice(0); batch.length > 0; batch = run.queue.splice(0))
      for (const m of batch) {
        try {
          run.head = (yield { kind: 'log.append', logId: run.entry.logId, message: m }) as number;
        } catch (error) {
          if (!run.aborted) this.ctx.fail(error);
          run.queue.length = 0;
          // Its events are not all kept: no answer is vouched for (the entry is declared dead).
          run.final = undefined;
          run.refused = false;
          if (!run.stopped) {
            run.stopped = true;
            this.ctx.emit({ kind: 'stop-reading', run: run.id });
            run.ending = true;
          }
          return;
        }
        this.ctx.tasks.ring(logBell(run.entry.logId));
      }
  }

  /** Everything of the body is read: its end is stored once its appends drained. */
  private bodyOver(run: Run): void {
    run.ending = true;
    if (!run.appending) this.finish(run);
  }

  private finish(run: Run): void {
    if (run.over) return;
    run.over = true;
    if (this.local.get(run.entry.memoKey) === run) this.local.delete(run.entry.memoKey);
    this.ctx.emit({ kind: 'body-over', run: run.id, final: run.final });
    const done = (stored: boolean) => {
      if (run.address !== undefined)
        this.ctx.addressKeys.finished(run.address, run.entry.memoKey, this.ctx.now());
      // The refusal is answered only once it is stored: the client's corrected re-issue must find the key
      // `refused` (it then runs), not still `running`. Unstored, the attempt is served from the log.
      this.accept(run, stored ? run.refusal : undefined);
      this.runs.delete(run.id);
      this.ctx.emit({ kind: 'run-done', run: run.id });
    };
    this.ctx.tasks.spawn(this.storeEnd(run.entry, run.final, run.refused, run.head), done, (e) => {
      this.ctx.fail(e);
      done(false);
    });
  }

  /** The end of a body run, stored; on a store failure it is kept for the lease tick to store again. */
  private *storeEnd(
    entry: MemoEntry,
    final: JsonRpcMessage | undefined,
    refused: boolean,
    head: number,
  ): Task<boolean> {
    try {
      yield* this.bodyEnd(entry, final, refused, head);
      this.unstored.delete(entry.memoKey);
      return true;
    } catch (error) {
      this.ctx.fail(error);
      this.unstored.set(entry.memoKey, { entry, final, refused, head });
      return false;
    }
  }

  /**
   * `keyedBodyEndSteps`: the outcome recorded durably first, under the id the final response gets in the
   * log (after `head`, the run's last append: no log read), then appended: no stream ever writes an
   * outcome the memo does not hold.
   */
  private *bodyEnd(
    entry: MemoEntry,
    final: JsonRpcMessage | undefined,
    refused: boolean,
    head: number,
  ): Task {
    const steps = this.ctx.d.bodyEnd(entry, final, refused, head);
    const step = function* (this: KeyedBodies, c: KeyedBodyEndCommand): Task<unknown> {
      switch (c.kind) {
        case 'read-window':
          return yield { kind: 'log.window', logId: entry.logId };
        case 'watched':
          return this.ctx.tasks.sleeping(logBell(entry.logId));
        case 'record':
          return yield* record(this.ctx, c.entry, c.event, c.watched);
        case 'append-final':
          yield { kind: 'log.append-final', logId: entry.logId, message: c.message };
          return undefined;
        case 'ring':
          this.ctx.tasks.ring(logBell(entry.logId));
          return undefined;
      }
    }.bind(this);
    yield* driveSteps(steps as Generator<KeyedBodyEndCommand, void, never>, step);
  }

  abortLocal(mk: string): void {
    const run = this.local.get(mk);
    if (!run || run.aborted) return;
    run.aborted = true;
    this.ctx.emit({ kind: 'abort-body', run: run.id });
  }
}
