import { describe, expect, it } from 'vitest';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { WakePort } from '../../src/server/wake-port.js';

/**
 * The keyed runtime holds no timer of its own once a server mounts it: every deadline the keyed core
 * decides (here the lease tick, a third of `leaseMs`) is a wake-up asked of the server's port.
 */

/** A real port that counts the wake-ups asked of it. */
class CountingPort extends WakePort {
  asked = 0;
  override after(ms: number, fn: (now: number) => void) {
    this.asked++;
    return super.after(ms, fn);
  }
}

/** The memory memo, counting lease renewals (one per lease tick). */
class CountingMemo extends MemoryMemoStore {
  renewals = 0;
  override async renewLease(): Promise<void> {
    this.renewals++;
  }
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return check();
}

describe('the keyed runtime on the host timer port', () => {
  it('after useWakes, the lease ticks come from the given port', async () => {
    const memo = new CountingMemo({ memoWindowMs: 60_000 });
    const keyed = createKeyedRequests({ log: new MemoryEventLog(), memo, leaseMs: 60 });
    const port = new CountingPort();
    keyed.useWakes?.(port);
    const from = memo.renewals;
    // A tick every 20 ms: three renewals within 10 s even on a loaded machine.
    expect(await until(() => memo.renewals >= from + 3, 10_000)).toBe(true);
    // Each tick is a wake-up the port was asked for (the first, then one per tick at least).
    expect(port.asked).toBeGreaterThanOrEqual(3);
    await keyed.close();
    // Closed, the core has no deadline left: the port holds no timer.
    expect(await until(() => port.hasRef() === undefined, 5_000)).toBe(true);
  });

  it('a port given again is kept, and a later one takes over the deadlines', async () => {
    const memo = new CountingMemo({ memoWindowMs: 60_000 });
    const keyed = createKeyedRequests({ log: new MemoryEventLog(), memo, leaseMs: 60 });
    const first = new CountingPort();
    const second = new CountingPort();
    keyed.useWakes?.(first);
    keyed.useWakes?.(first);
    expect(await until(() => first.asked >= 2, 10_000)).toBe(true);
    keyed.useWakes?.(second);
    const before = first.asked;
    const from = memo.renewals;
    expect(await until(() => memo.renewals >= from + 3 && second.asked >= 3, 10_000)).toBe(true);
    // The first port is asked nothing more once the second holds the deadlines.
    expect(first.asked).toBe(before);
    await keyed.close();
  });
});
