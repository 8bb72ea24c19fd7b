import { deepStrictEqual as equal, strictEqual as same } from 'node:assert/strict';
import type { CursorRecord } from '../../../machines/client/cursor.js';
import { MAX_EVENT_ID_LENGTH } from '../../../machines/client/limits.js';
import type { CursorStore } from '../../client/cursor-store.js';
import { type ContractCase, withStores } from './harness.js';

/** A store the suite can close (a cursor store has no `close`: the factory's may, or it is a no-op). */
type Closable<S> = S & { close?(): Promise<void> };

/**
 * How the suite gets cursor stores. `reopen` is optional (a store that says it is durable must have it):
 * the restart cases are left out without it.
 */
export interface CursorStoreFactory<S extends CursorStore = CursorStore> {
  /** A store over fresh, empty data (its own file, key or row). */
  create(): Promise<S> | S;
  /** A new store over the data `store` left: the client process restarted. */
  reopen?(store: S): Promise<S> | S;
}

/** A record as the client writes it: every field, a request stream and the standalone stream. */
const recordOf = (n: number, over: Partial<CursorRecord> = {}): CursorRecord => ({
  serverUrl: 'http://127.0.0.1:1234/mcp',
  sessionId: `session-${n}`,
  protocolVersion: '2025-06-18',
  initializeRequest: {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', clientInfo: { name: 'c ✓', version: '1' }, capabilities: {} },
  },
  advertisement: {
    retentionMs: 600_000,
    maxEventsPerStream: 1000,
    idleTtlMs: 1_800_000,
    heartbeatMs: 15_000,
    gapSignalling: true,
    duplicateRequestProtection: true,
  },
  streams: {
    standalone: { kind: 'standalone', lastEventId: `e1.0.${n}` },
    'r:7': { kind: 'request', lastEventId: `e1.3.${n}` },
    'r:"x"': { kind: 'request' },
  },
  ...over,
});

/**
 * The contract of a client {@link CursorStore}: nothing before the first save, a saved record read back
 * exactly, `null` forgets it, the last of racing saves wins (saves may be coalesced, never reordered), an
 * awaited save is readable at once, the largest record a client writes fits, and, for a durable store, all
 * of it across a restart. Memory, file and the simulated store of the property worlds pass it.
 *
 * @example With your test framework's `describe` and `it` (vitest, jest, mocha):
 * ```ts
 * import { cursorStoreContract, registerContract } from 'mcp-continuity/testing';
 * registerContract({ describe, it }, 'KeychainCursorStore', cursorStoreContract({
 *   create: () => new KeychainCursorStore(freshItemName()),
 *   reopen: (store) => new KeychainCursorStore(store.itemName),
 * }));
 * ```
 */
export function cursorStoreContract<S extends CursorStore>(factory: CursorStoreFactory<S>): ContractCase[] {
  const closeOf = (s: Closable<S>) => ({ close: async () => s.close?.() });
  const one = (name: string, body: (s: S) => Promise<void>): ContractCase => ({
    name,
    run: () =>
      withStores(async ({ open }) => {
        const s = await factory.create();
        await open(closeOf(s));
        await body(s);
      }),
  });

  const cases: ContractCase[] = [
    one('holds nothing before the first save, and says whether it is durable', async (s) => {
      same(await s.load(), null);
      same(typeof s.durable, 'boolean');
    }),

    one('reads back exactly what was saved; saving null forgets it', async (s) => {
      const r = recordOf(1);
      await s.save(r);
      equal(await s.load(), r);
      const minimal: CursorRecord = { sessionId: 's', streams: {} };
      await s.save(minimal);
      equal(await s.load(), minimal);
      await s.save(null);
      same(await s.load(), null);
    }),

    one('each awaited save is what a load reads next', async (s) => {
      for (let i = 1; i <= 5; i++) {
        const r = recordOf(i);
        await s.save(r);
        equal(await s.load(), r);
      }
    }),

    one('the last of racing saves wins (they may be coalesced, never reordered)', async (s) => {
      const records = Array.from({ length: 20 }, (_, i) => recordOf(i));
      await Promise.all(records.map((r) => s.save(r)));
      equal(await s.load(), records[19]);
      await Promise.all([s.save(recordOf(100)), s.save(null)]);
      same(await s.load(), null);
    }),

    one(
      'keeps the largest record a client writes: many streams, event ids at their length bound',
      async (s) => {
        const streams: Record<string, { kind: 'request'; lastEventId: string }> = {};
        for (let i = 0; i < 500; i++)
          streams[`r:${i}`] = { kind: 'request', lastEventId: `${i}.`.padEnd(MAX_EVENT_ID_LENGTH, 'x') };
        const r = recordOf(1, { streams });
        await s.save(r);
        equal(await s.load(), r);
      },
    ),
  ];

  const { reopen } = factory;
  if (reopen)
    cases.push({
      name: 'a durable store keeps the last record across a restart, and keeps it forgotten once null',
      run: () =>
        withStores(async ({ open }) => {
          const first = await factory.create();
          await open(closeOf(first));
          same(first.durable, true, 'a store that can be reopened says it is durable');
          const records = Array.from({ length: 10 }, (_, i) => recordOf(i));
          await Promise.all(records.map((r) => first.save(r)));
          const second = await reopen(first);
          await open(closeOf(second));
          equal(await second.load(), records[9]);
          await second.save(null);
          const third = await reopen(second);
          await open(closeOf(third));
          same(await third.load(), null);
        }),
    });
  return cases;
}
