import { describe, expect, it } from 'vitest';
import { ContinuityMeta, DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { KeyedCore, type KeyedCoreDecisions } from '../../machines/server/keyed-core.js';
import type { KeyedCommand, KeyedFact, KeyedStoreCall } from '../../machines/server/keyed-core-io.js';
import type { MemoEntry } from '../../machines/server/keyed-memo.js';
import { keyedLimits, planKeyedWake } from '../../machines/server/keyed-timing.js';
import { SimEventLog } from '../../properties/world/sim-event-log.js';
import { executeStoreCall } from '../../properties/world-modern/keyed-ports.js';
import { SimMemoStore } from '../../properties/world-modern/sim-memo.js';

/**
 * The keyed core alone (machines/server/keyed-core.ts): facts in, commands out, on the simulated memo and
 * log and a clock the test moves. Each row shows one decision or deadline the core owns.
 */
const WINDOW = 60_000;

class Host {
  now = 0;
  readonly memo = new SimMemoStore({ memoWindowMs: WINDOW, now: () => this.now, since: -WINDOW });
  readonly logs = new SimEventLog({ maxEventsPerStream: 100, retentionMs: WINDOW }, () => this.now);
  readonly leases = new Set<string>(['me']);
  readonly log: KeyedCommand[] = [];
  /** A store call that throws instead (a store failure). */
  failing: ((call: KeyedStoreCall) => boolean) | undefined;
  readonly core: KeyedCore;

  constructor(limits: Parameters<typeof keyedLimits>[0] = {}, decisions: Partial<KeyedCoreDecisions> = {}) {
    let n = 0;
    this.core = new KeyedCore(
      {
        instanceId: 'me',
        memoWindowMs: WINDOW,
        limits: keyedLimits({ keepAliveMs: 0, ...limits }, WINDOW, DEFAULT_CONTINUITY_SETTINGS.maxKeyLength),
        ids: { fingerprint: (c) => c, logDigest: () => 'd', epoch: () => `e${++n}` },
        decisions,
      },
      this.now,
    );
    this.drain();
  }

  tell(fact: KeyedFact): void {
    this.core.handle(fact, this.now);
    this.drain();
  }

  /** Moves the clock to `t`, waking the core at every time it asked for on the way. */
  until(t: number): void {
    for (let i = 0; i < 10_000; i++) {
      const at = this.core.nextWakeAt();
      if (at === undefined || at > t) break;
      this.now = Math.max(this.now, at);
      this.tell({ kind: 'tick' });
    }
    this.now = t;
    this.tell({ kind: 'tick' });
  }

  private drain(): void {
    for (let c = this.core.poll(); c; c = this.core.poll()) {
      this.log.push(c);
      if (c.kind !== 'store') continue;
      if (this.failing?.(c.call)) {
        this.core.handle({ kind: 'store-failed', op: c.op, error: new Error('store down') }, this.now);
        continue;
      }
      const value = executeStoreCall({ memo: this.memo, logs: this.logs, leased: () => this.leases }, c.call);
      this.core.handle({ kind: 'store-answer', op: c.op, value }, this.now);
    }
  }

  of<K extends KeyedCommand['kind']>(kind: K): Array<Extract<KeyedCommand, { kind: K }>> {
    return this.log.filter((c): c is Extract<KeyedCommand, { kind: K }> => c.kind === kind);
  }

  stores(kind: KeyedStoreCall['kind']): number {
    return this.of('store').filter((c) => c.call.kind === kind).length;
  }

  frames(request: number) {
    return this.of('write')
      .filter((w) => w.request === request)
      .map((w) => w.frame);
  }
}

const call = (id: number, key: string, extra: Record<string, unknown> = {}): JsonRpcMessage => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: {
    name: 'charge',
    arguments: {},
    _meta: { [ContinuityMeta.idempotencyKey]: key, progressToken: id, ...extra },
  },
});
const progress = (n: number): JsonRpcMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: 1, progress: n },
});
const result = (id: number): JsonRpcMessage => ({ jsonrpc: '2.0', id, result: { content: [] } });

describe('the keyed core: facts in, commands out', () => {
  it('a new key runs once; its events and outcome go to the starting attempt from the log', () => {
    const h = new Host();
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    const [run] = h.of('run-body');
    expect(run?.message).toMatchObject({ id: 1 });
    h.tell({ kind: 'body-response', run: run?.run as number, status: 200 });
    expect(h.of('read-messages')).toHaveLength(1);
    expect(h.of('open-stream').map((c) => c.request)).toEqual([1]);
    h.tell({ kind: 'body-message', run: 1, message: progress(1) });
    h.tell({ kind: 'body-message', run: 1, message: result(1) });
    expect(h.of('stop-reading')).toHaveLength(1);
    expect(h.frames(1).map((f) => f.kind)).toEqual(['event', 'event']);
    expect(h.frames(1)[1]).toMatchObject({ message: { id: 1, result: { content: [] } } });
    expect(h.of('end-stream').map((c) => c.request)).toEqual([1]);
    expect(h.memo.get('1:p|k')?.state).toMatch(/committed|answered/);
    expect(h.core.stats()).toEqual({ runningHere: 0, waitingLogs: 0 });
  });

  it('a new key costs only the store calls it needs: no lease, memo-age or window read, no look before anything changed', () => {
    const h = new Host();
    h.log.length = 0;
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    h.tell({ kind: 'body-response', run: 1, status: 200 });
    h.tell({ kind: 'body-message', run: 1, message: result(1) });
    expect(h.frames(1).at(-1)).toMatchObject({ message: { id: 1 } });
    const calls = h.of('store').map((c) => c.call.kind);
    // The entry runs here: its owner is alive without asking; a first attempt never asks the memo's age.
    expect(calls).not.toContain('memo.alive');
    expect(calls).not.toContain('memo.complete-for');
    // The body's end knows its log's head (the run made every append): it reads no window.
    expect(calls).not.toContain('log.window');
    expect(calls).toEqual([
      // A first attempt creates at once (no read first); its log is opened by its first event: none here.
      'memo.create',
      // No first look: nothing changed since the entry was created here; the end's ring wakes the response.
      // The end reads nothing first (its compare-and-set expects the run's entry); no event, no log to
      // finish: the outcome is in the memo alone.
      'memo.replace',
      // One look once the end rang: the entry holds the outcome, recorded after every event (none): no log read.
      'memo.get',
    ]);
  });

  it('a re-issue of a running key attaches: no second run, the same events under its own progress token', () => {
    const h = new Host();
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    h.tell({ kind: 'body-response', run: 1, status: 200 });
    h.tell({ kind: 'body-message', run: 1, message: progress(1) });
    h.tell({
      kind: 'request',
      request: 2,
      message: call(2, 'k', { [ContinuityMeta.lastEventId]: null }),
      principal: 'p',
    });
    expect(h.of('run-body')).toHaveLength(1);
    expect(h.of('note').some((n) => n.note.kind === 'attached' && n.note.run === 1)).toBe(true);
    h.tell({ kind: 'body-message', run: 1, message: result(1) });
    expect(h.frames(2).at(0)).toMatchObject({ message: { params: { progressToken: 2 } } });
    expect(h.frames(2).at(-1)).toMatchObject({ message: { id: 2 } });
  });

  it('an unkeyed request passes; a malformed key is answered 400 at once', () => {
    const h = new Host();
    h.tell({
      kind: 'request',
      request: 1,
      message: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} },
      principal: undefined,
    });
    expect(h.of('pass')).toEqual([{ kind: 'pass', request: 1 }]);
    h.tell({ kind: 'request', request: 2, message: call(2, ''), principal: undefined });
    expect(h.of('answer')[0]).toMatchObject({ request: 2, status: 400 });
  });

  it('owns the lease tick: renewal every third of the lease, and nothing in between', () => {
    const h = new Host({ leaseMs: 3_000, sweepMs: 1_000_000 });
    expect(h.stores('memo.renew-lease')).toBe(1);
    expect(h.core.nextWakeAt()).toBe(1_000);
    h.until(999);
    expect(h.stores('memo.renew-lease')).toBe(1);
    h.until(3_000);
    expect(h.stores('memo.renew-lease')).toBe(4);
  });

  it('owns the keep-alives and the poll of an attached response', () => {
    const h = new Host({ keepAliveMs: 500, pollMs: 200, leaseMs: 1_000_000, sweepMs: 1_000_000 });
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    h.tell({ kind: 'body-response', run: 1, status: 200 });
    const reads = h.stores('log.read');
    h.until(1_000);
    expect(h.frames(1).filter((f) => f.kind === 'keep-alive')).toHaveLength(2);
    // One look per poll without a wake-up: five in a second.
    expect(h.stores('log.read') - reads).toBe(5);
  });

  it('the starting attempt waits for the SDK up to its start wait, then is served from the log', () => {
    const h = new Host({ startWaitMs: 1_000, leaseMs: 1_000_000, sweepMs: 1_000_000 });
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    h.until(999);
    expect(h.of('open-stream')).toHaveLength(0);
    h.until(1_000);
    expect(h.of('open-stream')).toHaveLength(1);
  });

  it('a refusal is stored as refused first, then answered as the SDK answered it', () => {
    const h = new Host();
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    h.tell({ kind: 'body-response', run: 1, status: 400 });
    expect(h.of('read-refusal')).toHaveLength(1);
    const body = { jsonrpc: '2.0', id: null, error: { code: -32020, message: 'header' } };
    h.tell({
      kind: 'body-refusal',
      run: 1,
      status: 400,
      body,
      text: JSON.stringify(body),
      headers: [['x', 'y']],
    });
    expect(h.memo.get('1:p|k')?.state).toBe('refused');
    expect(h.of('answer')[0]).toMatchObject({ request: 1, status: 400, headers: [['x', 'y']] });
    expect(h.of('open-stream')).toHaveLength(0);
  });

  it('an end the store failed to take is stored again by the next lease tick', () => {
    const h = new Host({ leaseMs: 3_000, sweepMs: 1_000_000 });
    h.tell({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' });
    h.tell({ kind: 'body-response', run: 1, status: 200 });
    h.failing = (c) => c.kind === 'memo.replace';
    h.tell({ kind: 'body-message', run: 1, message: result(1) });
    expect(h.of('error')).toHaveLength(1);
    expect(h.memo.get('1:p|k')?.state).toBe('running');
    h.failing = undefined;
    h.until(1_000);
    expect(h.memo.get('1:p|k')?.state).toMatch(/committed|answered/);
  });

  it('the lease tick aborts a body whose entry was cancelled elsewhere, and only that one', () => {
    const h = new Host({ leaseMs: 3_000, sweepMs: 1_000_000 });
    h.tell({ kind: 'request', request: 1, message: call(1, 'a'), principal: 'p' });
    h.tell({ kind: 'request', request: 2, message: call(2, 'b'), principal: 'p' });
    const a = h.memo.get('1:p|a') as MemoEntry;
    h.memo.replace({ ...a, state: 'cancelled', finishedAt: 0 }, a);
    h.until(1_000);
    expect(h.of('abort-body').map((c) => c.run)).toEqual([1]);
  });

  it("the host's one wake-up: kept while no later than the core's next deadline, moved earlier, cleared", () => {
    expect(planKeyedWake(100, 150, 90)).toEqual({ kind: 'keep' });
    expect(planKeyedWake(100, 100, 90)).toEqual({ kind: 'keep' });
    expect(planKeyedWake(100, 95, 90)).toEqual({ kind: 'set', at: 95, delayMs: 5 });
    expect(planKeyedWake(undefined, 80, 90)).toEqual({ kind: 'set', at: 80, delayMs: 0 });
    expect(planKeyedWake(100, undefined, 90)).toEqual({ kind: 'clear' });
    expect(planKeyedWake(undefined, undefined, 90)).toEqual({ kind: 'clear' });
  });

  it('keyed requests wait for the start (lease, orphans) before they run', () => {
    const h = new Host();
    // A second core on the same stores whose store does not answer yet: its request is deferred.
    h.failing = () => false;
    const stalled: KeyedCommand[] = [];
    const core = new KeyedCore(
      {
        instanceId: 'other',
        memoWindowMs: WINDOW,
        limits: keyedLimits({}, WINDOW, 255),
        ids: { fingerprint: (c) => c, logDigest: () => 'd', epoch: () => 'x' },
      },
      0,
    );
    for (let c = core.poll(); c; c = core.poll()) stalled.push(c);
    core.handle({ kind: 'request', request: 1, message: call(1, 'k'), principal: 'p' }, 0);
    expect(core.poll()).toBeUndefined();
    const renew = stalled.find((c) => c.kind === 'store');
    core.handle({ kind: 'store-answer', op: (renew as { op: number }).op, value: undefined }, 0);
    const running = core.poll() as Extract<KeyedCommand, { kind: 'store' }>;
    expect(running.call.kind).toBe('memo.running');
    core.handle({ kind: 'store-answer', op: running.op, value: [] }, 0);
    const alive = core.poll() as Extract<KeyedCommand, { kind: 'store' }>;
    core.handle({ kind: 'store-answer', op: alive.op, value: new Set() }, 0);
    expect(core.poll()).toMatchObject({ kind: 'store', call: { kind: 'memo.create' } });
  });
});
