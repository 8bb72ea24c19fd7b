import { describe, expect, it } from 'vitest';
import { WRITE_BEHIND_LIMIT, WriteBehind } from '../../src/server/write-behind.js';

/** A log port whose stores the test settles: what was handed over, in order, and in which group. */
function port() {
  const calls: Array<{ stream: number; message: unknown; ok: () => void; fail: (e: unknown) => void }> = [];
  const store = (stream: number, message: unknown) =>
    new Promise<void>((ok, fail) => {
      calls.push({ stream, message, ok, fail });
    });
  return { calls, store };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('WriteBehind (stores the SDK server does not wait for)', () => {
  it('stores a group at a time, in order: what arrives while one is stored goes in the next', async () => {
    const p = port();
    const w = new WriteBehind(p.store);
    w.add(1, 'a');
    w.add(1, 'b');
    w.add(2, 'c');
    expect(p.calls.map((c) => c.message)).toEqual(['a']);
    p.calls[0]?.ok();
    await turn();
    expect(p.calls.map((c) => c.message)).toEqual(['a', 'b', 'c']);
    for (const c of p.calls) c.ok();
    await w.settled(1);
    await w.settled(2);
    expect(w.empty).toBe(true);
  });

  it('after a lost store nothing more of its stream is stored; the next send is refused, once', async () => {
    const p = port();
    const w = new WriteBehind(p.store);
    w.add(1, 'a');
    w.add(1, 'b');
    w.add(2, 'x');
    p.calls[0]?.fail(new Error('lost'));
    await turn();
    // 'b' came after the lost 'a': not stored. Stream 2 goes on.
    expect(p.calls.map((c) => c.message)).toEqual(['a', 'x']);
    p.calls[1]?.ok();
    await turn();
    expect(() => w.add(1, 'c')).toThrow('lost');
    expect(p.calls.map((c) => c.message)).toEqual(['a', 'x']);
    // Reported: the stream's answer is not told again, and what follows is stored.
    await expect(w.settled(1)).resolves.toBeUndefined();
    w.add(1, 'd');
    expect(p.calls.map((c) => c.message)).toEqual(['a', 'x', 'd']);
    p.calls[2]?.ok();
    await w.settled(1);
    expect(w.empty).toBe(true);
  });

  it("a stream's answer waits for its stores, and is told of a lost one instead of being vouched for", async () => {
    const p = port();
    const w = new WriteBehind(p.store);
    w.add(1, 'a');
    let outcome = 'pending';
    const answer = w.settled(1).then(
      () => 'stored',
      (e: Error) => e.message,
    );
    void answer.then((v) => {
      outcome = v;
    });
    await turn();
    expect(outcome).toBe('pending');
    p.calls[0]?.fail(new Error('lost'));
    expect(await answer).toBe('lost');
    expect(w.empty).toBe(true);
  });

  it(`with ${WRITE_BEHIND_LIMIT} queued, the sender waits for the group being stored`, async () => {
    const p = port();
    const w = new WriteBehind(p.store);
    const waits = Array.from({ length: WRITE_BEHIND_LIMIT + 1 }, (_, i) => w.add(0, i));
    expect(waits.slice(0, WRITE_BEHIND_LIMIT).every((x) => x === undefined)).toBe(true);
    let released = false;
    void waits[WRITE_BEHIND_LIMIT]?.then(() => {
      released = true;
    });
    await turn();
    expect(released).toBe(false);
    p.calls[0]?.ok();
    await turn();
    for (const c of p.calls.slice(1)) c.ok();
    await turn();
    expect(released).toBe(true);
    await w.settled(0);
    expect(w.empty).toBe(true);
  });

  it('drain waits for every group, failed or not, and keeps the failure to report', async () => {
    const p = port();
    const w = new WriteBehind(p.store);
    w.add(1, 'a');
    w.add(2, 'b');
    let drained = false;
    void w.drain().then(() => {
      drained = true;
    });
    p.calls[0]?.fail(new Error('lost'));
    await turn();
    expect(drained).toBe(false);
    p.calls[1]?.ok();
    await turn();
    expect(drained).toBe(true);
    await expect(w.settled(1)).rejects.toThrow('lost');
    expect(w.empty).toBe(true);
  });
});
