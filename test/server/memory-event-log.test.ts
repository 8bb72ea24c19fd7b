import { afterEach, describe, expect, it, vi } from 'vitest';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { DEFAULT_RETENTION_POLICY } from '../../machines/server/retention.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import type { WakePort } from '../../src/server/wake-port.js';

// The EventLog contract runs on this log in test/contracts/event-log.test.ts.

const note = (i: number): JsonRpcMessage => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { i },
});

describe('MemoryEventLog', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('defaults to the shared retention policy and is not durable', async () => {
    const log = new MemoryEventLog();
    expect(log.policy).toEqual(DEFAULT_RETENTION_POLICY);
    expect(log.durable).toBe(false);
    await log.close();
  });

  it('rejects a policy that cannot retain anything', () => {
    expect(() => new MemoryEventLog({ maxEventsPerStream: 0 })).toThrow(RangeError);
    expect(() => new MemoryEventLog({ maxEventsPerStream: 1.5 })).toThrow(RangeError);
    expect(() => new MemoryEventLog({ retentionMs: -1 })).toThrow(RangeError);
    expect(() => new MemoryEventLog({ sweepIntervalMs: 0 })).toThrow(RangeError);
  });

  it('stays bounded by the count limit however much is appended', async () => {
    const log = new MemoryEventLog({ maxEventsPerStream: 100, now: () => 0 });
    for (let i = 1; i <= 10_000; i++) await log.append('s', 0, note(i));
    expect(log.stats()).toEqual({ sessions: 1, streams: 1, events: 100 });
    const r = await log.read('s', 0, 0);
    expect(r?.window).toMatchObject({ oldest: 9_901, head: 10_000 });
    expect(r?.events.map((e) => e.seq)).toEqual(Array.from({ length: 100 }, (_, i) => 9_901 + i));
    await log.close();
  });

  it('frees aged messages when a stream is read, not only when appended to', async () => {
    let clock = 0;
    const log = new MemoryEventLog({ retentionMs: 10, now: () => clock });
    for (let i = 0; i < 5; i++) await log.append('s', 0, note(i));
    clock = 11;
    expect(log.stats().events).toBe(5);
    await log.window('s', 0);
    expect(log.stats().events).toBe(0);
    await log.close();
  });

  it('dropSession frees everything the session held', async () => {
    const log = new MemoryEventLog({ now: () => 0 });
    await log.append('a', 0, note(1));
    await log.append('a', 1, note(2));
    await log.append('b', 0, note(3));
    await log.dropSession('a');
    expect(log.stats()).toEqual({ sessions: 1, streams: 1, events: 1 });
    await log.close();
  });

  it('sweep ages idle streams and forgets finished, empty ones', async () => {
    let clock = 0;
    const log = new MemoryEventLog({ retentionMs: 100, now: () => clock });
    await log.appendFinal('a', 1, note(1)); // finished: forgotten once aged out
    await log.append('a', 0, note(2)); // unfinished: kept (its head matters) but emptied
    await log.appendFinal('b', 2, note(3));
    await log.openStream('c', 0); // unfinished, never used: kept
    clock = 50;
    await log.appendFinal('b', 3, note(4)); // finished but still within retention: kept

    clock = 101;
    log.sweep();
    expect(log.stats()).toEqual({ sessions: 3, streams: 3, events: 1 });
    expect(await log.window('a', 1)).toBeUndefined();
    expect(await log.window('a', 0)).toEqual({ oldest: 2, head: 1, appendedAt: [], finished: false });
    expect(await log.window('b', 2)).toBeUndefined();
    expect(await log.window('b', 3)).toMatchObject({ oldest: 1, head: 1, finished: true });
    expect(await log.append('a', 0, note(5))).toBe(2);

    clock = 151;
    log.sweep();
    // Session b had only finished streams: nothing of it is kept.
    expect(log.stats()).toEqual({ sessions: 2, streams: 2, events: 1 });
    await log.close();
  });

  it('sweeps on a timer started by the first append and stopped by close', async () => {
    vi.useFakeTimers({ now: 0 });
    const log = new MemoryEventLog({ retentionMs: 4_000, now: () => Date.now() });
    await log.openStream('s', 0);
    expect(vi.getTimerCount()).toBe(0); // lazily started
    await log.appendFinal('s', 1, note(1));
    await log.append('s', 0, note(2));
    await log.append('t', 0, note(3));
    expect(vi.getTimerCount()).toBe(1); // one timer for the whole log
    expect(log.stats()).toEqual({ sessions: 2, streams: 3, events: 3 });

    // Default interval: retentionMs / 4 = 1 s. Nobody touches the log; the sweep alone reclaims it.
    vi.advanceTimersByTime(4_000);
    expect(log.stats().events).toBe(3);
    vi.advanceTimersByTime(1_000);
    expect(log.stats()).toEqual({ sessions: 2, streams: 2, events: 0 });

    await log.close();
    expect(vi.getTimerCount()).toBe(0);
    await log.close(); // idempotent
    log.sweep(); // harmless after close
    expect(log.stats()).toEqual({ sessions: 0, streams: 0, events: 0 });
    await expect(log.append('s', 0, note(4))).rejects.toThrow(/closed/);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('uses a one-second minimum sweep interval by default and honours an explicit one', async () => {
    vi.useFakeTimers({ now: 0 });
    const fast = new MemoryEventLog({ retentionMs: 100, now: () => Date.now() });
    await fast.appendFinal('s', 0, note(1));
    vi.advanceTimersByTime(999);
    expect(fast.stats().streams).toBe(1);
    vi.advanceTimersByTime(1);
    expect(fast.stats().streams).toBe(0);
    await fast.close();

    const explicit = new MemoryEventLog({ retentionMs: 100, sweepIntervalMs: 200, now: () => Date.now() });
    await explicit.appendFinal('s', 0, note(1));
    vi.advanceTimersByTime(200);
    expect(explicit.stats().streams).toBe(0);
    await explicit.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('does not keep the process alive', async () => {
    const log = new MemoryEventLog();
    await log.append('s', 0, note(1));
    // The sweep is a wake-up of the log's timer port (src/server/wake-port.ts), whose one timer is unref'd.
    const wakes = (log as unknown as { wakes: WakePort }).wakes;
    expect(wakes.hasRef()).toBe(false);
    await log.close();
  });
});
