import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { forgetPoint, forgotten } from '../../machines/server/request-memory.js';
import {
  coreOf,
  joinSnapshot,
  mergeSnapshot,
  newEntries,
  numberedCore,
  type RebaseStored,
  rebaseAdmissions,
  type StreamEntry,
  settledFacts,
  watermarkOf,
} from '../../machines/server/shared-record.js';
import type { Rebased } from '../../src/server/event-log.js';
import { RedisEventLog } from '../../src/server/redis-event-log.js';
import { type RedisServer, startRedisServer } from '../support/redis-server.js';

/**
 * Admissions commute (machines/server/shared-record.ts): the Redis commit script against the layout's
 * rules, and a simulated store that follows them (`rebaseAdmissions` over a map), driven by the same
 * random interleavings of three instances admitting requests of one session, some of them the same
 * request sent to two instances at once. After every step both stores answer alike; at the end every
 * request ran once, the numbering is dense, and each instance's copy, caught up, is the stored record.
 */
let server: RedisServer;
beforeAll(async () => {
  server = await startRedisServer();
});
afterAll(async () => {
  await server?.dispose();
});

interface Snap {
  value: string;
  context: {
    epoch: string;
    standaloneOpened: boolean;
    nextStream: number;
    forgottenBelow: number;
    requestMemory: number;
    streams: Record<number, StreamEntry>;
    requests: Record<string, number>;
  };
}

const CAPACITY = 6;
const empty = (): Snap => ({
  value: 'live',
  context: {
    epoch: 'e',
    standaloneOpened: false,
    nextStream: 1,
    forgottenBelow: 1,
    requestMemory: CAPACITY,
    streams: {},
    requests: {},
  },
});

/** What the session machine does with new request ids on a copy (request-memory.ts forgetting included). */
function admit(copy: Snap, keys: string[], owner: string): Snap {
  const streams = { ...copy.context.streams };
  const requests = { ...copy.context.requests };
  let next = copy.context.nextStream;
  for (const key of keys) {
    streams[next] = { kind: 'request', requestKey: key, owner };
    requests[key] = next++;
  }
  const floor = forgetPoint(next, copy.context.forgottenBelow, CAPACITY);
  for (const n of Object.keys(streams).map(Number)) if (forgotten(n, floor)) delete streams[n];
  for (const [k, n] of Object.entries(requests)) if (forgotten(n, floor)) delete requests[k];
  return {
    ...copy,
    context: { ...copy.context, nextStream: next, forgottenBelow: floor, streams, requests },
  };
}

/** The simulated store: the record as a version, a core's numbering and entries, per the layout's rules. */
class SimStore {
  version = 0;
  numbering = { nextStream: 1, forgottenBelow: 1 };
  entries = new Map<number, StreamEntry>();

  private write(entries: ReadonlyArray<readonly [number, StreamEntry]>, nextStream: number, f: number) {
    for (let n = this.numbering.forgottenBelow; n < f; n++) this.entries.delete(n);
    for (const [n, e] of entries) this.entries.set(n, e);
    this.numbering = { nextStream, forgottenBelow: f };
    this.version++;
  }

  commit(base: Snap, decided: Snap, expected: number): boolean | Rebased {
    const entries = newEntries(watermarkOf(base), decided) ?? [];
    if (expected === this.version) {
      this.write(entries, decided.context.nextStream, decided.context.forgottenBelow);
      return true;
    }
    const from = base.context.nextStream;
    const since: Array<[number, StreamEntry]> = [];
    for (let n = from; n < this.numbering.nextStream; n++) {
      const e = this.entries.get(n);
      if (e) since.push([n, e]);
    }
    const stored: RebaseStored = {
      numbering: this.numbering,
      standalone: false,
      facts: 'e|false|false',
      since,
    };
    const onto = this.numbering;
    const rebased = rebaseAdmissions(
      {
        base: watermarkOf(base),
        entries,
        watermark: watermarkOf(decided),
        facts: settledFacts(decided),
        capacity: CAPACITY,
      },
      stored,
    );
    if (!rebased) return false;
    this.write(rebased.entries, rebased.numbering.nextStream, rebased.numbering.forgottenBelow);
    return { kind: 'rebased', version: this.version, onto, since };
  }

  snapshot(): Snap {
    const core = numberedCore(coreOf(empty()), this.numbering);
    return joinSnapshot(
      core,
      [...this.entries].sort((a, b) => a[0] - b[0]),
    ) as Snap;
  }
}

/** A small seeded generator: the same interleavings every run. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('admissions on a shared record: the Redis script and the simulated store follow one rule', () => {
  for (const seed of [1, 2, 3, 4]) {
    it(`seed ${seed}: 60 steps of three instances`, async () => {
      const log = new RedisEventLog({ url: server.url, keyPrefix: `adm-${process.pid}-${seed}:` });
      const sim = new SimStore();
      const rand = random(seed);
      const copies = [0, 1, 2].map(() => ({ snap: empty(), version: 0 }));
      const ran: string[] = [];
      let fresh = 0;
      const rec = (snapshot: unknown) => ({
        id: 's',
        epoch: 'e',
        initialize: { jsonrpc: '2.0' as const, id: 1, method: 'initialize' },
        snapshot,
      });
      let rebases = 0;
      let conflicts = 0;
      try {
        for (let step = 0; step < 60; step++) {
          const i = Math.floor(rand() * 3);
          const copy = copies[i] as { snap: Snap; version: number };
          // Mostly new requests; sometimes one another instance admitted and this copy has not seen.
          const known = [...sim.entries.values()].map((e) => e.requestKey as string);
          const keys =
            rand() < 0.25 && known.length > 0
              ? [known[Math.floor(rand() * known.length)] as string]
              : Array.from({ length: 1 + Math.floor(rand() * 2) }, () => `r${++fresh}`);
          const unknown = keys.filter((k) => copy.snap.context.requests[k] === undefined);
          if (unknown.length === 0) continue; // a duplicate on this copy: the machine commits nothing
          const decided = admit(copy.snap, unknown, `i${i}`);
          const base = watermarkOf(copy.snap);
          const got = await log.shared.commitEntries?.(
            rec(coreOf(decided)),
            newEntries(base, decided) ?? [],
            watermarkOf(decided),
            copy.version,
            settledFacts(decided),
            { base, capacity: CAPACITY },
          );
          const want = sim.commit(copy.snap, decided, copy.version);
          expect(got).toEqual(want);
          if (want === true) {
            copy.snap = decided;
            copy.version = sim.version;
            ran.push(...unknown);
          } else if (want === false) {
            conflicts++;
            const since = await log.shared.loadSince?.('s', copy.version, base);
            expect(since?.record).toBeDefined();
            copy.snap = mergeSnapshot(copy.snap, base, since?.record?.snapshot, since?.entries ?? []) as Snap;
            copy.version = since?.version ?? -1;
            expect(copy.snap).toEqual(sim.snapshot());
          } else {
            rebases++;
            // The decider catches up on what came with the answer and decides again: exactly what was written.
            const merged = mergeSnapshot(
              decided,
              base,
              numberedCore(coreOf(decided), want.onto),
              want.since,
            ) as Snap;
            const again = admit(merged, unknown, `i${i}`);
            copy.snap = again;
            copy.version = want.version;
            expect(again).toEqual(sim.snapshot());
            ran.push(...unknown);
          }
          expect(await log.shared.load('s')).toEqual({ version: sim.version, record: rec(sim.snapshot()) });
        }
        // Every request ran once; the numbering is dense (every number given once).
        expect(new Set(ran).size).toBe(ran.length);
        expect(sim.snapshot().context.nextStream).toBe(ran.length + 1);
        expect(rebases).toBeGreaterThan(0);
        expect(conflicts).toBeGreaterThan(0);
      } finally {
        await log.close();
      }
    });
  }
});
