import { describe, expect, it } from 'vitest';
import { ContinuityErrorCode } from '../../machines/continuity-extension.js';
import {
  driveKeyedCallSync,
  type KeyedBodyEndCommand,
  type KeyedCallCommand,
  type KeyedFollowCommand,
  keyedBodyEndSteps,
  keyedCallSteps,
  keyedFollowSteps,
} from '../../machines/server/keyed-execute.js';
import {
  admitNewKey,
  keyedEventId,
  type MemoEntry,
  memoExpired,
  orphanedEntries,
  stepMemoEntry,
} from '../../machines/server/keyed-memo.js';
import {
  abortsLocalRun,
  appendsFinal,
  attachStep,
  deliverAs,
  isFinalAnswer,
  keyedRunEnd,
  nextEntry,
  planKeyedCall,
  planKeyedCancel,
  refusalResponse,
  refusedBeforeRun,
  restartWon,
  routeKeyedMessage,
} from '../../machines/server/keyed-plan.js';
import type { StreamWindow } from '../../machines/server/retention.js';

const FP = '["tools/call",{"name":"charge"}]';
const entry = (over: Partial<MemoEntry> = {}): MemoEntry => ({
  memoKey: '3:bob|k',
  principal: 'bob',
  fingerprint: FP,
  state: 'running',
  owner: 'me',
  logId: 'keyed-x',
  epoch: 'ep1',
  createdAt: 0,
  ...over,
});
const win = (oldest: number, head: number, finished = false): StreamWindow => ({
  oldest,
  head,
  finished,
  appendedAt: Array.from({ length: Math.max(0, head - oldest + 1) }, () => 0),
});
const facts = (over: Partial<Parameters<typeof planKeyedCall>[0]> = {}) => ({
  reading: { kind: 'keyed' as const, key: 'k', reissue: true, lastEventId: 'ep1-1-2' },
  fingerprint: FP,
  entry: entry(),
  window: win(1, 4),
  ownerAlive: true,
  memoCompleteForMs: 0,
  memoWindowMs: 1000,
  ...over,
});
const recorded = { kind: 'result' as const, result: { content: [] } };

describe('keyed plan (pure): memo lookup + reading → what the server does', () => {
  it('a new key runs; an unknown re-issue is outcome unknown unless the memo covers the window', () => {
    expect(
      planKeyedCall(facts({ entry: undefined, reading: { kind: 'keyed', key: 'k', reissue: false } })),
    ).toEqual({ kind: 'execute' });
    expect(planKeyedCall(facts({ entry: undefined }))).toMatchObject({
      kind: 'reply',
      reply: { status: 200, error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } },
    });
    expect(planKeyedCall(facts({ entry: undefined, memoCompleteForMs: 1000 }))).toEqual({ kind: 'execute' });
  });

  it('running: attaches after the cursor; other arguments 409; a cursor never issued 400; evicted 410 exact', () => {
    expect(planKeyedCall(facts())).toEqual({ kind: 'serve', afterSeq: 2 });
    expect(planKeyedCall(facts({ fingerprint: 'other' }))).toMatchObject({ reply: { status: 409 } });
    expect(
      planKeyedCall(facts({ reading: { kind: 'keyed', key: 'k', reissue: true, lastEventId: 'ep1-1-9' } })),
    ).toMatchObject({ reply: { status: 400, error: { code: -32602 } } });
    expect(planKeyedCall(facts({ window: win(6, 8) }))).toMatchObject({
      reply: {
        status: 410,
        error: { code: ContinuityErrorCode.EVENTS_EVICTED, data: { lostCount: 3, resumeAfter: 'ep1-1-5' } },
      },
    });
    expect(planKeyedCall(facts({ ownerAlive: false }))).toEqual({ kind: 'declare-died' });
  });

  it('finished: the recorded outcome after the cursor; cancelled -32013; unknown -32012', () => {
    const done = entry({ state: 'committed', outcome: recorded, finalSeq: 5, finishedAt: 1 });
    expect(planKeyedCall(facts({ entry: done, window: win(1, 5, true) }))).toEqual({
      kind: 'serve',
      afterSeq: 2,
    });
    expect(planKeyedCall(facts({ entry: entry({ state: 'cancelled' }) }))).toMatchObject({
      reply: { error: { code: ContinuityErrorCode.CANCELLED } },
    });
    expect(planKeyedCall(facts({ entry: entry({ state: 'outcomeUnknown' }) }))).toMatchObject({
      reply: { error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } },
    });
  });

  it('the stored entry moves by the machine: finish records, cancel only while running, memo window', () => {
    const finished = nextEntry(entry(), { type: 'tool.finished', outcome: recorded, finalSeq: 3 }, 50);
    expect(finished).toMatchObject({ state: 'committed', outcome: recorded, finalSeq: 3, finishedAt: 50 });
    expect(planKeyedCancel(finished)).toEqual({ kind: 'ignore' });
    expect(planKeyedCancel(entry())).toEqual({ kind: 'cancel' });
    expect(nextEntry(entry(), { type: 'cancel.requested' }, 7)).toMatchObject({
      state: 'cancelled',
      finishedAt: 7,
    });
    expect(nextEntry(finished as MemoEntry, { type: 'instance.died' }, 9)).toBeUndefined();
    expect(memoExpired(finished as MemoEntry, 100, 149)).toBe(false);
    expect(memoExpired(finished as MemoEntry, 100, 150)).toBe(true);
    expect(memoExpired(entry(), 100, 1e12)).toBe(false);
    expect(stepMemoEntry(finished as MemoEntry, { type: 'memo.expired' }).state).toBe('forgotten');
  });

  it('the per-principal bound never evicts: 429 until the first entry leaves its window', () => {
    expect(admitNewKey([entry()], 2, 1000, 0)).toEqual({ kind: 'admit' });
    expect(admitNewKey([entry(), entry({ state: 'committed', finishedAt: 0 })], 2, 5000, 1000)).toEqual({
      kind: 'full',
      retryAfterSeconds: 4,
    });
    expect(orphanedEntries([entry(), entry({ owner: 'gone' })], (o) => o === 'me')).toHaveLength(1);
  });

  it('an attached stream writes in sequence, then the outcome under the final id; progress gets the attempt token', () => {
    const ev = (seq: number, m: object) => ({ seq, message: { jsonrpc: '2.0', ...m } as never });
    const p = (n: number) =>
      ev(n, { method: 'notifications/progress', params: { progressToken: 'a', progress: n } });
    const done = entry({ state: 'answered', outcome: recorded, finalSeq: 3 });
    const step = attachStep(done, win(1, 3, true), [p(2), ev(3, { id: 1, result: {} })], 1, true);
    expect(step.write.map((e) => e.seq)).toEqual([2]);
    expect(step.end).toEqual({ kind: 'outcome', outcome: recorded, seq: 3 });
    // The log was read before the body's last append, the entry after its record (review finding): the
    // stream reads again instead of ending, so event 3 is written before the outcome at 4.
    const late = entry({ state: 'committed', outcome: recorded, finalSeq: 4 });
    const early = attachStep(late, win(1, 2), [p(2)], 1, true);
    expect(early.write.map((e) => e.seq)).toEqual([2]);
    expect(early.end).toBeUndefined();
    const caught = attachStep(late, win(1, 4, true), [p(3), ev(4, { id: 1, result: {} })], 2, true);
    expect(caught.write.map((e) => e.seq)).toEqual([3]);
    expect(caught.end).toEqual({ kind: 'outcome', outcome: recorded, seq: 4 });
    expect(attachStep(entry(), win(1, 2), [p(2)], 1, true).end).toBeUndefined();
    expect(attachStep(entry(), win(1, 2), [], 2, false).declareDied).toBe(true);
    expect(attachStep(entry(), win(5, 8), [], 2, true).end).toEqual({ kind: 'lost' });
    expect(deliverAs(p(2).message, { id: 9, progressToken: 'b' })).toMatchObject({
      params: { progressToken: 'b' },
    });
    expect(deliverAs(p(2).message, { id: 9 })).toBeUndefined();
  });
});

describe('keyed call steps (the procedure src/ and the simulated world drive alike)', () => {
  const reading = { kind: 'keyed' as const, key: 'k', reissue: false };
  const drive = (answers: (c: KeyedCallCommand) => unknown) => {
    const seen: string[] = [];
    const end = driveKeyedCallSync(
      keyedCallSteps({ reading, fingerprint: FP, memoWindowMs: 1000, now: 5 }),
      (c) => {
        seen.push(c.kind);
        return answers(c) as never;
      },
    );
    return { end, seen };
  };

  it('a new key (a first attempt): created before anything is read, no log opened, the body starts once', () => {
    const fresh = entry();
    const { end, seen } = drive((c) =>
      c.kind === 'read-entry'
        ? undefined
        : c.kind === 'new-entry'
          ? fresh
          : c.kind === 'create-entry'
            ? { kind: 'created' }
            : 0,
    );
    // A first attempt of a key the memo does not hold runs whatever the memo's age: no completeness read.
    // Its log is opened by its first event (the log's append), not here.
    expect(seen).toEqual(['new-entry', 'create-entry', 'start-run']);
    expect(end).toEqual({ kind: 'serve', entry: fresh, afterSeq: 0 });
  });

  it('a re-issue of a key the memo does not hold asks how long the memo is complete; too young: outcome unknown', () => {
    const seen: string[] = [];
    const end = driveKeyedCallSync(
      keyedCallSteps({
        reading: { kind: 'keyed', key: 'k', reissue: true },
        fingerprint: FP,
        memoWindowMs: 1000,
        now: 5,
      }),
      (c) => {
        seen.push(c.kind);
        return (c.kind === 'memo-complete-for' ? 999 : undefined) as never;
      },
    );
    expect(seen).toEqual(['read-entry', 'memo-complete-for']);
    expect(end).toMatchObject({
      kind: 'reply',
      reply: { error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } },
    });
  });

  it('a lost creation race: the loser plans with the entry its create found (no read) and attaches; it never starts the body', () => {
    const winner = entry({ owner: 'other' });
    const { end, seen } = drive((c) => {
      if (c.kind === 'new-entry') return entry({ epoch: 'ep2' });
      if (c.kind === 'create-entry') return { kind: 'exists', entry: winner };
      if (c.kind === 'read-window') return undefined; // the winner's body sent no event yet: no log
      if (c.kind === 'owner-alive') return true;
      return 0;
    });
    expect(seen).toEqual(['new-entry', 'create-entry', 'read-window', 'owner-alive']);
    expect(end).toEqual({ kind: 'serve', entry: winner, afterSeq: 0 });
  });

  it('a first attempt whose address is at its bound: the memo is read, a known key attaches, a new one is 429', () => {
    const known = entry({ owner: 'other' });
    const full = { kind: 'full', retryAfterSeconds: 2, bound: 'address' } as const;
    const attach = drive((c) =>
      c.kind === 'create-entry' ? full : c.kind === 'read-entry' ? known : c.kind === 'owner-alive',
    );
    expect(attach.seen).toEqual(['new-entry', 'create-entry', 'read-entry', 'read-window', 'owner-alive']);
    expect(attach.end).toEqual({ kind: 'serve', entry: known, afterSeq: 0 });
    const refuse = drive((c) =>
      c.kind === 'create-entry' ? full : c.kind === 'new-entry' ? entry() : undefined,
    );
    expect(refuse.seen).toEqual(['new-entry', 'create-entry', 'read-entry', 'new-entry', 'create-entry']);
    expect(refuse.end).toMatchObject({ kind: 'reply', reply: { status: 429, retryAfterSeconds: 2 } });
  });

  it('a running entry whose owner is gone: declared dead (compare-and-set), then -32012', () => {
    let current = entry({ owner: 'gone' });
    const { end, seen } = drive((c) => {
      if (c.kind === 'create-entry') return { kind: 'exists', entry: current };
      if (c.kind === 'read-entry') return current;
      if (c.kind === 'read-window') return win(1, 0);
      if (c.kind === 'owner-alive') return false;
      if (c.kind === 'replace-entry') current = c.next;
      return 0;
    });
    expect(seen.filter((k) => k === 'replace-entry')).toHaveLength(1);
    expect(current).toMatchObject({ state: 'outcomeUnknown', finishedAt: 5 });
    expect(end).toMatchObject({
      kind: 'reply',
      reply: { error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } },
    });
  });

  it('a full memo: 429 before anything runs', () => {
    const { end, seen } = drive((c) =>
      c.kind === 'new-entry'
        ? entry()
        : c.kind === 'create-entry'
          ? { kind: 'full', retryAfterSeconds: 3 }
          : undefined,
    );
    expect(seen).not.toContain('start-run');
    expect(end).toMatchObject({ kind: 'reply', reply: { status: 429, retryAfterSeconds: 3 } });
  });

  it('after the events aged out, the recorded final still counts as retained: exact count, resumeAfter reaches it', () => {
    const done = entry({ state: 'committed', outcome: recorded, finalSeq: 5, finishedAt: 1 });
    // The log swept the finished stream entirely (memory log), or aged out all but nothing (SQLite).
    for (const window of [undefined, win(6, 5, true)]) {
      expect(planKeyedCall(facts({ entry: done, window }))).toMatchObject({
        reply: { status: 410, error: { data: { lostCount: 2, resumeAfter: 'ep1-1-4' } } },
      });
      const after4 = { kind: 'keyed' as const, key: 'k', reissue: true, lastEventId: 'ep1-1-4' };
      expect(planKeyedCall(facts({ entry: done, window, reading: after4 }))).toEqual({
        kind: 'serve',
        afterSeq: 4,
      });
    }
  });

  it('a duplicate first attempt (no lastEventId) of running work attaches from the start', () => {
    expect(planKeyedCall(facts({ reading: { kind: 'keyed', key: 'k', reissue: false } }))).toEqual({
      kind: 'serve',
      afterSeq: 0,
    });
  });
});

describe('committed or answered: the machine decides from who watches', () => {
  it('an outcome recorded while a response of this instance watches is answered, else committed', () => {
    const ev = { type: 'tool.finished' as const, outcome: recorded, finalSeq: 2 };
    expect(nextEntry(entry(), ev, 1, true)?.state).toBe('answered');
    expect(nextEntry(entry(), ev, 1, false)?.state).toBe('committed');
  });
});

describe('the runner: what the instance running a body does when it ends', () => {
  const final = { jsonrpc: '2.0' as const, id: 1, result: { content: [] } };
  it('records an answer, declares a missing one outcome unknown, leaves an entry that moved on alone', () => {
    expect(keyedRunEnd(entry(), 'me', final)).toEqual({
      kind: 'record',
      outcome: { kind: 'result', result: final.result },
    });
    expect(keyedRunEnd(entry(), 'me', undefined)).toEqual({ kind: 'declare-died' });
    expect(keyedRunEnd(entry({ state: 'cancelled' }), 'me', final)).toEqual({ kind: 'nothing' });
    expect(keyedRunEnd(entry({ owner: 'other' }), 'me', final)).toEqual({ kind: 'nothing' });
    expect(appendsFinal(entry({ state: 'committed', finalSeq: 3 }), 3)).toBe(true);
    expect(appendsFinal(entry({ state: 'outcomeUnknown' }), 3)).toBe(false);
    expect(abortsLocalRun(entry({ state: 'cancelled' }), 'me')).toBe(true);
    expect(abortsLocalRun(entry(), 'me')).toBe(false);
    expect(isFinalAnswer(final, 1)).toBe(true);
    expect(isFinalAnswer({ ...final, id: 2 }, 1)).toBe(false);
  });
});

describe('attached response steps (keyedFollowSteps: what src/ and the world drive alike)', () => {
  const progress = (n: number) => ({
    seq: n,
    message: {
      jsonrpc: '2.0' as const,
      method: 'notifications/progress',
      params: { progressToken: 'a', progress: n },
    },
  });
  const attempt = { id: 7, progressToken: 'b' };
  /** Drives the steps over a scripted world: `looks[i]` is what the i-th look reads. */
  const follow = (looks: Array<{ entry: MemoEntry | undefined; window?: StreamWindow; alive?: boolean }>) => {
    const seen: KeyedFollowCommand[] = [];
    let look = -1;
    const end = driveKeyedCallSync(
      keyedFollowSteps({ entry: entry(), attempt, afterSeq: 1 }),
      (c): unknown => {
        seen.push(c);
        if (seen.length > 50) throw new Error('the steps never ended');
        if (c.kind === 'read-log') {
          const w = looks[look]?.window;
          // Progress at 2 and 3; the final response (never written from the log) at 4.
          if (!w) return undefined;
          const events = [2, 3, 4]
            .filter((s) => s > c.afterSeq && s <= w.head)
            .map((s) => (s === 4 ? { seq: 4, message: { jsonrpc: '2.0', id: 1, result: {} } } : progress(s)));
          return { window: w, events };
        }
        if (c.kind === 'read-entry') return looks[++look]?.entry;
        if (c.kind === 'owner-alive') return looks[look]?.alive ?? true;
        return undefined;
      },
    );
    return { end, seen };
  };

  it('another work under the key (a refused key restarted under the stream): ends without an answer', () => {
    const restarted = entry({ logId: 'keyed-other', epoch: 'ep9' });
    const { end, seen } = follow([{ entry: restarted, window: win(1, 1) }]);
    expect(end).toEqual({ end: 'lost' });
    expect(seen.map((c) => c.kind)).toEqual(['read-entry']);
  });

  it('writes new events as the attempt, waits, then ends with the recorded outcome under its id', () => {
    const done = entry({ state: 'committed', outcome: recorded, finalSeq: 4, finishedAt: 1 });
    const { end, seen } = follow([
      { entry: entry(), window: win(1, 3) },
      { entry: done, window: win(1, 4, true) },
    ]);
    // The second look finds the outcome recorded after every event it wrote: it reads no log.
    expect(seen.map((c) => c.kind)).toEqual([
      'read-entry',
      'read-log',
      'owner-alive',
      'write',
      'wait',
      'read-entry',
    ]);
    expect(seen[1]).toEqual({ kind: 'read-log', afterSeq: 1 });
    expect(seen[3]).toEqual({
      kind: 'write',
      frames: [2, 3].map((n) => ({
        id: keyedEventId(entry(), n),
        message: { ...progress(n).message, params: { progressToken: 'b', progress: n } },
      })),
    });
    expect(end).toEqual({
      end: 'outcome',
      frame: { id: keyedEventId(entry(), 4), message: { jsonrpc: '2.0', id: 7, result: recorded.result } },
    });
  });

  it("a dead owner's running entry is declared dead, looked at again at once, and ends -32012 without an id", () => {
    const gone = entry({ owner: 'gone' });
    const unknown = entry({ owner: 'gone', state: 'outcomeUnknown', finishedAt: 1 });
    const { end, seen } = follow([
      { entry: gone, window: win(1, 1), alive: false },
      { entry: unknown, window: win(1, 1) },
    ]);
    expect(seen.map((c) => c.kind)).toEqual([
      'read-entry',
      'read-log',
      'owner-alive',
      'declare-died',
      'read-entry',
      'read-log',
    ]);
    expect(seen[3]).toEqual({ kind: 'declare-died', entry: gone });
    expect(end.end).toBe('outcome-unknown');
    expect(end.frame?.id).toBeUndefined();
    expect(end.frame?.message).toMatchObject({ id: 7, error: { code: ContinuityErrorCode.OUTCOME_UNKNOWN } });
  });

  it('events it had not written evicted: lost, no frame (the re-issue gets the exact 410)', () => {
    expect(follow([{ entry: entry(), window: win(3, 4) }]).end).toEqual({ end: 'lost' });
  });
});

describe('body end steps (keyedBodyEndSteps: what src/ and the world drive alike)', () => {
  const final = { jsonrpc: '2.0' as const, id: 1, result: { content: [] } };
  const run = (
    answer: Partial<Record<string, unknown>>,
    fin: typeof final | undefined,
    started: MemoEntry = entry(),
  ) => {
    const seen: KeyedBodyEndCommand[] = [];
    driveKeyedCallSync(keyedBodyEndSteps(started, fin), (c): unknown => {
      seen.push(c);
      return answer[c.kind];
    });
    return seen;
  };

  it('records the outcome under head + 1 (watched: answered) before appending the final response, then rings', () => {
    const won = entry({ state: 'answered', outcome: { kind: 'result', result: final.result }, finalSeq: 5 });
    // Nothing is read before the record: its compare-and-set expects the run's own entry.
    const seen = run({ 'read-window': win(1, 4), watched: true, record: won }, final);
    expect(seen).toEqual([
      { kind: 'read-window' },
      { kind: 'watched' },
      {
        kind: 'record',
        entry: entry(),
        event: { type: 'tool.finished', outcome: { kind: 'result', result: final.result }, finalSeq: 5 },
        watched: true,
      },
      { kind: 'append-final', message: final },
      { kind: 'ring' },
    ]);
  });

  it('a lost recording appends nothing; no answer declares the entry dead; an entry that moved on only rings', () => {
    const lost = run(
      {
        'read-window': win(1, 2),
        watched: false,
        record: entry({ state: 'cancelled' }),
      },
      final,
    );
    expect(lost.map((c) => c.kind)).toEqual(['read-window', 'watched', 'record', 'ring']);
    expect(lost[2]).toMatchObject({ event: { finalSeq: 3 } });
    // The SDK ended without an answer (its stream broke): the side effect may have happened.
    expect(run({}, undefined)).toEqual([
      { kind: 'record', entry: entry(), event: { type: 'instance.died' }, watched: false },
    ]);
    expect(run({}, final, entry({ state: 'cancelled' })).map((c) => c.kind)).toEqual(['ring']);
  });
});

describe('routing by the extension keys', () => {
  it('unkeyed goes to the endpoint; malformed is 400; cancel and call carry the key', () => {
    const call = keyedCallMessage();
    expect(routeKeyedMessage(call, 255)).toMatchObject({ kind: 'call', id: 1, reading: { key: 'k1' } });
    expect(routeKeyedMessage({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, 255)).toEqual({
      kind: 'unkeyed',
    });
    expect(routeKeyedMessage({ jsonrpc: '2.0', id: 1, result: {} }, 255)).toEqual({ kind: 'unkeyed' });
    expect(routeKeyedMessage(keyedCallMessage('k'.repeat(300)), 255)).toMatchObject({
      kind: 'reply',
      id: 1,
      reply: { status: 400 },
    });
    const cancel = {
      jsonrpc: '2.0' as const,
      method: 'notifications/cancelled',
      params: { requestId: 1, _meta: { 'io.github.mcp-continuity/idempotencyKey': 'k1' } },
    };
    expect(routeKeyedMessage(cancel, 255)).toEqual({ kind: 'cancel', key: 'k1' });
  });
});

function keyedCallMessage(key = 'k1') {
  return {
    jsonrpc: '2.0' as const,
    id: 1,
    method: 'tools/call',
    params: { name: 'charge', arguments: {}, _meta: { 'io.github.mcp-continuity/idempotencyKey': key } },
  };
}

describe('refused before the tool ran (the SDK answered 4xx): nothing ran, the key runs again', () => {
  const refusal = { kind: 'error' as const, error: { code: -32020, message: 'HeaderMismatch' } };
  const refusedEntry = entry({ state: 'refused', outcome: refusal, finalSeq: 1, finishedAt: 3 });

  it('which statuses are refusals: the SDK’s pre-dispatch 4xx; not 499 (closed mid-run), not 5xx, not 2xx', () => {
    expect([400, 401, 403, 404, 413, 415, 429, 498].map(refusedBeforeRun)).toEqual(Array(8).fill(true));
    expect([200, 202, 399, 499, 500, 503].map(refusedBeforeRun)).toEqual(Array(6).fill(false));
  });

  it('the refusal is recorded as the SDK’s error under the request id, or one naming the status', () => {
    const body = { jsonrpc: '2.0', id: null, error: { code: -32020, message: 'm', data: { x: 1 } } };
    expect(refusalResponse(400, body, 7)).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32020, message: 'm', data: { x: 1 } },
    });
    expect(refusalResponse(403, undefined, 'a')).toEqual({
      jsonrpc: '2.0',
      id: 'a',
      error: { code: -32600, message: 'Refused by the server (HTTP 403)' },
    });
  });

  it('the body end records `tool.refused` (compare-and-set from running), then appends the refusal', () => {
    const final = { jsonrpc: '2.0' as const, id: 1, error: refusal.error };
    expect(keyedRunEnd(entry(), 'me', final, true)).toEqual({ kind: 'refused', outcome: refusal });
    const seen: KeyedBodyEndCommand[] = [];
    driveKeyedCallSync(keyedBodyEndSteps(entry(), final, true), (c) => {
      seen.push(c);
      if (c.kind === 'read-window') return win(1, 0);
      if (c.kind === 'watched') return true;
      if (c.kind === 'record') return nextEntry(c.entry, c.event, 3, c.watched);
      return undefined;
    });
    // No event before it: the key has no log to finish, the refusal is in the memo alone.
    expect(seen.map((c) => c.kind)).toEqual(['read-window', 'watched', 'record', 'ring']);
    const record = seen.find((c) => c.kind === 'record') as Extract<KeyedBodyEndCommand, { kind: 'record' }>;
    expect(record.event).toEqual({ type: 'tool.refused', outcome: refusal, finalSeq: 1 });
    expect(nextEntry(entry(), record.event, 3)).toMatchObject({
      state: 'refused',
      finalSeq: 1,
      finishedAt: 3,
    });
    expect(appendsFinal(refusedEntry, 1)).toBe(false);
    expect(appendsFinal({ ...refusedEntry, finalSeq: 4 }, 4)).toBe(true);
  });

  it('a re-issue (or a duplicate first attempt) of a refused key plans to run it; other arguments are 409', () => {
    expect(planKeyedCall(facts({ entry: refusedEntry }))).toEqual({ kind: 'execute-over' });
    expect(
      planKeyedCall(facts({ entry: refusedEntry, reading: { kind: 'keyed', key: 'k', reissue: false } })),
    ).toEqual({ kind: 'execute-over' });
    expect(planKeyedCall(facts({ entry: refusedEntry, fingerprint: 'other' }))).toMatchObject({
      kind: 'reply',
      reply: { status: 409 },
    });
    // Streams attached when it was refused end with the refusal, under its final id.
    expect(attachStep(refusedEntry, win(1, 1, true), [], 0, true).end).toEqual({
      kind: 'outcome',
      outcome: refusal,
      seq: 1,
    });
  });

  it('a restart won only when the store holds the fresh running entry', () => {
    const fresh = entry({ logId: 'keyed-y' });
    expect(restartWon(fresh, fresh)).toBe(true);
    expect(restartWon(entry({ logId: 'keyed-z' }), fresh)).toBe(false); // another attempt's restart
    expect(restartWon(refusedEntry, fresh)).toBe(false);
    expect(restartWon(undefined, fresh)).toBe(false);
  });

  it('the steps: a fresh entry replaces the refused one (compare-and-set), the old log goes, the body starts', () => {
    const fresh = entry({ epoch: 'ep2', logId: 'keyed-y' });
    const seen: KeyedCallCommand[] = [];
    const end = driveKeyedCallSync(
      keyedCallSteps({
        reading: { kind: 'keyed', key: 'k', reissue: false },
        fingerprint: FP,
        memoWindowMs: 1000,
        now: 5,
      }),
      (c) => {
        seen.push(c);
        if (c.kind === 'create-entry') return { kind: 'exists' as const, entry: refusedEntry };
        if (c.kind === 'read-window') return win(1, 1, true);
        if (c.kind === 'new-entry') return fresh;
        if (c.kind === 'restart-entry') return true;
        return 0 as never;
      },
    );
    expect(seen.map((c) => c.kind)).toEqual([
      'new-entry',
      'create-entry',
      'read-window',
      'new-entry',
      'restart-entry',
      'start-run',
      'drop-log',
    ]);
    expect(seen.find((c) => c.kind === 'drop-log')).toMatchObject({ entry: { logId: 'keyed-x' } });
    expect(end).toEqual({ kind: 'serve', entry: fresh, afterSeq: 0 });
  });

  it('a lost restart race: the loser re-reads and attaches (it opened no log); it never starts the body', () => {
    const winner = entry({ epoch: 'ep3', logId: 'keyed-z', owner: 'other' });
    let reads = 0;
    const seen: KeyedCallCommand[] = [];
    const end = driveKeyedCallSync(
      keyedCallSteps({
        reading: { kind: 'keyed', key: 'k', reissue: false },
        fingerprint: FP,
        memoWindowMs: 1000,
        now: 5,
      }),
      (c) => {
        seen.push(c);
        if (c.kind === 'create-entry') return { kind: 'exists' as const, entry: refusedEntry };
        if (c.kind === 'read-entry') return reads++ === 0 ? winner : undefined;
        if (c.kind === 'read-window') return win(1, 0);
        if (c.kind === 'owner-alive') return true;
        if (c.kind === 'new-entry') return entry({ epoch: 'ep2', logId: 'keyed-y' });
        if (c.kind === 'restart-entry') return false;
        return 0 as never;
      },
    );
    expect(seen.map((c) => c.kind)).not.toContain('start-run');
    expect(seen.map((c) => c.kind)).not.toContain('drop-log');
    expect(end).toEqual({ kind: 'serve', entry: winner, afterSeq: 0 });
  });
});
