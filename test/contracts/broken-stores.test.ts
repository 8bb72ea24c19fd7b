import { describe, expect, it } from 'vitest';
import type { CursorRecord } from '../../machines/client/cursor.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { MemoEntry, MemoExpected } from '../../machines/server/keyed-memo.js';
import { MemoryCursorStore } from '../../src/client/cursor-store.js';
import type { MemoCreate } from '../../src/server/memo-store.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import {
  cursorStoreContract,
  eventLogContract,
  failingCases,
  memoStoreContract,
} from '../../src/testing/index.js';

/** The contract suites can fail: stores broken on purpose are caught by the cases that name the rule. */

/** Writes whatever it is given: compare-and-set without the compare (last writer wins). */
class BlindReplaceStore extends MemoryMemoStore {
  override async replace(next: MemoEntry, _expected: MemoExpected): Promise<MemoEntry | undefined> {
    // Whatever is stored now is taken as expected (the private map is read to skip the compare).
    const stored = (this as unknown as { entries: Map<string, MemoEntry> }).entries.get(next.memoKey);
    return super.replace(next, stored ?? next);
  }
}

/** Reads, waits, then writes: two creates of one key both see it absent and both win. */
class CheckThenActStore extends MemoryMemoStore {
  override async create(entry: MemoEntry, max: number): Promise<MemoCreate> {
    const existing = await this.get(entry.memoKey);
    if (existing) return { kind: 'exists', entry: existing };
    await new Promise((resolve) => setImmediate(resolve));
    // Another writer may have created it meanwhile: this one overwrites it and also answers `created`.
    if ((await this.replace(entry, entry)) === entry) return { kind: 'created' };
    return super.create(entry, max);
  }
}

/**
 * Compares the state alone, not which run the entry is (what every store did before `MemoExpected`
 * named the run): a writer that read one run overwrites a restarted run in the same state (ABA).
 */
class StateOnlyReplaceStore extends MemoryMemoStore {
  override async replace(next: MemoEntry, expected: MemoExpected): Promise<MemoEntry | undefined> {
    const stored = await this.get(next.memoKey);
    return super.replace(next, { state: expected.state, logId: stored?.logId ?? expected.logId });
  }
}

const failing = async (make: (o: { memoWindowMs: number; now: () => number }) => MemoryMemoStore) =>
  (await failingCases(memoStoreContract({ create: make }))).map((f) => f.name);

describe('a broken memo store fails the contract', () => {
  it('compare-and-set that does not compare: the CAS and the outcome race cases fail', async () => {
    const names = await failing((o) => new BlindReplaceStore(o));
    expect(names).toContain(
      'replace is compare-and-set on the state: it writes only from the expected state',
    );
    expect(names).toContain(
      'two writers racing to record an outcome: exactly one compare-and-set wins, all see its entry',
    );
  });

  it('create as check-then-act: the create race case fails', async () => {
    const names = await failing((o) => new CheckThenActStore(o));
    expect(names).toContain(
      'two writers racing to create one key: exactly one creates it, every other is told of that entry',
    );
  });

  it('compare-and-set on the state alone, not the run: the ABA case fails, and only it', async () => {
    expect(await failing((o) => new StateOnlyReplaceStore(o))).toEqual([
      'compares the state and the run: a writer that read one run never overwrites another run in that state',
    ]);
  });

  it('the correct store fails nothing', async () => {
    expect(await failing((o) => new MemoryMemoStore(o))).toEqual([]);
  });
});

/** Every other save takes longer to land: racing saves land out of order (an unserialised file write). */
class ReorderingCursorStore extends MemoryCursorStore {
  private saves = 0;
  override async save(record: CursorRecord | null): Promise<void> {
    if (this.saves++ % 2 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    return super.save(record);
  }
}

describe('a broken cursor store fails the contract', () => {
  it('saves that land out of order: the racing-saves case fails, and only it', async () => {
    const failed = await failingCases(cursorStoreContract({ create: () => new ReorderingCursorStore() }));
    expect(failed.map((f) => f.name)).toEqual([
      'the last of racing saves wins (they may be coalesced, never reordered)',
    ]);
  });
});

/** `appendFinal` as a plain append: a call's answer can be written twice, and the stream never finishes. */
class NeverFinishingLog extends MemoryEventLog {
  override async appendFinal(sessionId: string, stream: number, message: JsonRpcMessage): Promise<number> {
    return this.append(sessionId, stream, message);
  }
}

describe('a broken event log fails the contract', () => {
  it('appendFinal that neither finishes nor excludes: the finish, race and retention cases fail', async () => {
    const failed = await failingCases(eventLogContract({ create: (o) => new NeverFinishingLog(o) }, 20));
    expect(failed.map((f) => f.name).sort()).toEqual(
      [
        'a finished window keeps what is retained',
        'agrees with the retention functions on every read (20 seeded random sequences)',
        'appendFinal writes the last message of a stream exactly once, however many race for it',
        'two writers appending at once: sequence numbers dense and distinct, each with its message',
      ].sort(),
    );
  });

  it('the correct log fails nothing', async () => {
    expect(await failingCases(eventLogContract({ create: (o) => new MemoryEventLog(o) }, 20))).toEqual([]);
  });
});
