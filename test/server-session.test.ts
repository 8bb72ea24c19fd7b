import { describe, expect, it } from 'vitest';
import { createActor, SimulatedClock } from 'xstate';
import { JsonRpcCode } from '../machines/codes.js';
import { appendToWindow, EMPTY_WINDOW } from '../machines/server/retention.js';
import { type ServerSessionEmitted, serverSessionMachine } from '../machines/server/session.machine.js';

function session(principal?: string, sharedStore = false) {
  const clock = new SimulatedClock();
  const actor = createActor(serverSessionMachine, {
    clock,
    input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000, principal, sharedStore },
  });
  const emitted: ServerSessionEmitted[] = [];
  actor.on('*', (e) => emitted.push(e as ServerSessionEmitted));
  actor.start();
  return { actor, clock, emitted, last: () => emitted.at(-1) };
}

describe('server session machine', () => {
  it('expires after the idle TTL with nothing attached or in flight', () => {
    const s = session();
    s.clock.increment(999);
    expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
    s.clock.increment(1);
    expect(s.actor.getSnapshot().value).toEqual({ ended: 'expired' });
    expect(s.last()).toEqual({ type: 'session.ended', reason: 'expired' });
  });

  it('activity restarts the idle clock', () => {
    const s = session();
    s.clock.increment(900);
    s.actor.send({ type: 'session.activity' });
    s.clock.increment(900);
    expect(s.actor.getSnapshot().matches('live')).toBe(true);
  });

  it('never expires while a request is in flight or a stream attached', () => {
    const s = session();
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    s.clock.increment(10_000);
    expect(s.actor.getSnapshot().value).toEqual({ live: 'busy' });
    s.actor.send({ type: 'stream.attached' });
    s.actor.send({ type: 'request.settled', requestKey: 'n:1' });
    s.clock.increment(10_000);
    expect(s.actor.getSnapshot().value).toEqual({ live: 'busy' });
    s.actor.send({ type: 'stream.detached' });
    expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
    s.clock.increment(1_000);
    expect(s.actor.getSnapshot().value).toEqual({ ended: 'expired' });
  });

  it('remembers a bounded number of request ids: a re-send before the forget point is a duplicate, after it a new request', () => {
    const clock = new SimulatedClock();
    const actor = createActor(serverSessionMachine, {
      clock,
      input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000, requestMemory: 3 },
    }).start();
    const decide = (requestKey: string) => {
      let decision: unknown;
      const sub = actor.on('decision.request', (e) => {
        decision = e.decision;
      });
      actor.send({ type: 'request.received', requestKey });
      sub.unsubscribe();
      return decision;
    };
    for (let i = 1; i <= 5; i++) expect(decide(`n:${i}`)).toEqual({ kind: 'execute', stream: i });
    const c = actor.getSnapshot().context;
    // Streams 1 and 2 fell behind the point: their ids and entries went; what is stored stays bounded.
    expect(c.forgottenBelow).toBe(3);
    expect(Object.keys(c.requests).sort()).toEqual(['n:3', 'n:4', 'n:5']);
    expect(Object.keys(c.streams).map(Number)).toEqual([3, 4, 5]);
    expect(decide('n:3')).toEqual({ kind: 'duplicate', stream: 3 });
    // Forgotten: the id is unknown, so it is a new request on a new stream (request-memory.ts's rule).
    expect(decide('n:1')).toEqual({ kind: 'execute', stream: 6 });
    expect(actor.getSnapshot().context.forgottenBelow).toBe(4);
    // A cursor into a forgotten stream is still this session's: the log's window answers it.
    let answer: unknown;
    actor.on('decision.resume', (e) => {
      answer = e.answer;
    });
    const window = appendToWindow(EMPTY_WINDOW, 0, { maxEventsPerStream: 10, retentionMs: 60_000 }).window;
    actor.send({ type: 'resume.requested', lastEventId: 'ep-2-0', window });
    expect(answer).toEqual({ kind: 'replay', stream: 2, afterSeq: 0 });
    actor.send({ type: 'resume.requested', lastEventId: 'ep-9-0', window });
    expect(answer).toMatchObject({ kind: 'invalid' });
  });

  it('numbers streams and never executes a request id twice', () => {
    const s = session();
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'execute', stream: 1 } });
    s.actor.send({ type: 'request.received', requestKey: 'n:2' });
    expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'execute', stream: 2 } });
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'duplicate', stream: 1 } });
  });

  it('answers cursors through answerCursor, with the window the log read', () => {
    const s = session();
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    let w = EMPTY_WINDOW;
    for (let i = 0; i < 5; i++) w = appendToWindow(w, 0, { maxEventsPerStream: 2, retentionMs: 1e9 }).window;
    s.actor.send({ type: 'resume.requested', lastEventId: 'ep-1-4', window: w });
    expect(s.last()).toEqual({ type: 'decision.resume', answer: { kind: 'replay', stream: 1, afterSeq: 4 } });
    s.actor.send({ type: 'resume.requested', lastEventId: 'ep-1-1', window: w });
    expect(s.last()).toMatchObject({ answer: { kind: 'gone', lostCount: 2 } });
    s.actor.send({ type: 'resume.requested', lastEventId: 'ep-5-1', window: undefined });
    expect(s.last()).toMatchObject({ answer: { kind: 'invalid', reason: 'foreign_cursor' } });
  });

  it('after a log reset, old cursors are answered epoch_changed', () => {
    const s = session();
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    s.actor.send({ type: 'log.reset', epoch: 'ep2' });
    s.actor.send({ type: 'resume.requested', lastEventId: 'ep-1-3', window: undefined });
    expect(s.last()).toMatchObject({ answer: { kind: 'gone', reason: 'epoch_changed' } });
  });

  it('the first cursorless GET replays the standalone stream from its start; later ones start at the head', () => {
    const s = session();
    s.actor.send({ type: 'standalone.used' });
    s.actor.send({ type: 'standalone.requested' });
    expect(s.last()).toEqual({
      type: 'decision.attach',
      decision: { kind: 'attach', stream: 0, from: 'start' },
    });
    s.actor.send({ type: 'standalone.requested' });
    expect(s.last()).toEqual({
      type: 'decision.attach',
      decision: { kind: 'attach', stream: 0, from: 'head' },
    });
  });

  it('DELETE terminates: streams are told, every later request is an unknown session', () => {
    const s = session();
    s.actor.send({ type: 'session.delete' });
    expect(s.emitted.slice(-2)).toEqual([
      { type: 'decision.delete', accepted: true },
      { type: 'session.ended', reason: 'terminated' },
    ]);
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'unknown-session' } });
    s.actor.send({ type: 'resume.requested', lastEventId: 'ep-1-1', window: undefined });
    expect(s.last()).toEqual({ type: 'decision.resume', answer: { kind: 'unknown-session' } });
    s.actor.send({ type: 'standalone.requested' });
    expect(s.last()).toEqual({ type: 'decision.attach', decision: { kind: 'unknown-session' } });
    s.actor.send({ type: 'session.delete' });
    expect(s.last()).toEqual({ type: 'decision.delete', accepted: false });
  });

  it('another principal presenting the id is told the session does not exist', () => {
    const s = session('alice');
    s.actor.send({ type: 'request.received', requestKey: 'n:1', principal: 'mallory' });
    expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'unknown-session' } });
    s.actor.send({ type: 'session.delete', principal: 'mallory' });
    expect(s.actor.getSnapshot().matches('live')).toBe(true);
    s.actor.send({ type: 'request.received', requestKey: 'n:1', principal: 'alice' });
    expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'execute', stream: 1 } });
  });

  it('stopping with a memory log ends the session with reason shutdown', () => {
    const s = session();
    s.actor.send({ type: 'server.stopping', durableLog: false });
    expect(s.last()).toEqual({ type: 'session.ended', reason: 'shutdown' });
    expect(s.actor.getSnapshot().value).toEqual({ ended: 'shutDown' });
  });

  it('stopping with a durable log releases the streams and keeps the session', () => {
    const s = session();
    s.actor.send({ type: 'server.stopping', durableLog: true });
    expect(s.last()).toEqual({ type: 'session.released' });
    expect(s.actor.getSnapshot().matches('live')).toBe(true);
  });

  it('a restored snapshot keeps streams and request ids (durable logs)', () => {
    const s = session();
    s.actor.send({ type: 'request.received', requestKey: 'n:1' });
    const snapshot = s.actor.getPersistedSnapshot();
    const restored = createActor(serverSessionMachine, {
      snapshot,
      input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000 },
    }).start();
    const seen: unknown[] = [];
    restored.on('decision.request', (e) => seen.push(e.decision));
    restored.send({ type: 'request.received', requestKey: 'n:1' });
    expect(seen).toEqual([{ kind: 'duplicate', stream: 1 }]);
  });

  it('woken from sleep, goes on with the time it slept as idle time', () => {
    const s = session();
    const slept = createActor(serverSessionMachine, {
      clock: s.clock,
      snapshot: s.actor.getPersistedSnapshot(),
      input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000 },
    }).start();
    slept.send({ type: 'session.woken', idleMs: 600 });
    s.clock.increment(399);
    expect(slept.getSnapshot().value).toEqual({ live: 'idle' });
    s.clock.increment(1);
    expect(slept.getSnapshot().value).toEqual({ ended: 'expired' });
    const overslept = createActor(serverSessionMachine, {
      snapshot: s.actor.getPersistedSnapshot(),
      input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000 },
    }).start();
    overslept.send({ type: 'session.woken', idleMs: 1_000 });
    expect(overslept.getSnapshot().value).toEqual({ ended: 'expired' });
  });

  describe('a request the SDK server does not answer never holds the session', () => {
    const running = (s: ReturnType<typeof session>) => s.actor.getSnapshot().context.running;

    it('cancelled: settled with no answer, its stream ends, and the idle TTL fires', () => {
      const s = session();
      s.actor.send({ type: 'request.received', requestKey: 'n:1' });
      s.actor.send({ type: 'request.unanswered', requestKey: 'n:1', cause: 'cancelled' });
      expect(s.emitted.at(-1)).toEqual({
        type: 'decision.unanswered',
        requestKey: 'n:1',
        stream: 1,
        answer: undefined,
      });
      expect(running(s)).toEqual({});
      expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
      s.clock.increment(1_000);
      expect(s.actor.getSnapshot().value).toEqual({ ended: 'expired' });
    });

    it('rejected by the SDK schema: settled with an Invalid Request answer', () => {
      const s = session();
      s.actor.send({ type: 'request.received', requestKey: 's:x' });
      s.actor.send({ type: 'request.unanswered', requestKey: 's:x', cause: 'rejected' });
      expect(s.last()).toMatchObject({
        type: 'decision.unanswered',
        stream: 1,
        answer: { code: JsonRpcCode.INVALID_REQUEST },
      });
      expect(s.actor.getSnapshot().context.inFlight).toBe(0);
      s.clock.increment(1_000);
      expect(s.actor.getSnapshot().value).toEqual({ ended: 'expired' });
    });

    it('unstored (the tool ran, the log refused its answer): settled as outcome unknown, never a failure', () => {
      const s = session();
      s.actor.send({ type: 'request.received', requestKey: 'n:7' });
      s.actor.send({ type: 'request.unanswered', requestKey: 'n:7', cause: 'unstored' });
      expect(s.last()).toMatchObject({
        type: 'decision.unanswered',
        answer: { code: JsonRpcCode.OUTCOME_UNKNOWN, data: { reason: 'answer_unstored' } },
      });
      expect(s.actor.getSnapshot().context.inFlight).toBe(0);
    });

    it('failed (the SDK unreachable before the handler ran): settled with an Internal error answer', () => {
      const s = session();
      s.actor.send({ type: 'request.received', requestKey: 'n:7' });
      s.actor.send({ type: 'request.unanswered', requestKey: 'n:7', cause: 'failed' });
      expect(s.last()).toMatchObject({
        type: 'decision.unanswered',
        answer: { code: JsonRpcCode.INTERNAL_ERROR },
      });
      s.clock.increment(1_000);
      expect(s.actor.getSnapshot().value).toEqual({ ended: 'expired' });
    });

    it('a request settles once: a late cancel, a second answer, or an unknown id change nothing', () => {
      const s = session();
      s.actor.send({ type: 'request.received', requestKey: 'n:1' });
      s.actor.send({ type: 'request.received', requestKey: 'n:2' });
      s.actor.send({ type: 'request.settled', requestKey: 'n:1' });
      const count = s.emitted.length;
      s.actor.send({ type: 'request.unanswered', requestKey: 'n:1', cause: 'cancelled' });
      s.actor.send({ type: 'request.settled', requestKey: 'n:1' });
      s.actor.send({ type: 'request.unanswered', requestKey: 'n:99', cause: 'cancelled' });
      expect(s.emitted.length).toBe(count);
      // n:2 still runs: the stray reports did not count it down.
      expect(running(s)).toEqual({ 'n:2': 2 });
      expect(s.actor.getSnapshot().value).toEqual({ live: 'busy' });
      s.actor.send({ type: 'request.settled', requestKey: 'n:2' });
      expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
    });

    it('a cancelled request id stays remembered: re-sent, it is a duplicate, never run again', () => {
      const s = session();
      s.actor.send({ type: 'request.received', requestKey: 'n:1' });
      s.actor.send({ type: 'request.unanswered', requestKey: 'n:1', cause: 'cancelled' });
      s.actor.send({ type: 'request.received', requestKey: 'n:1' });
      expect(s.last()).toEqual({ type: 'decision.request', decision: { kind: 'duplicate', stream: 1 } });
    });
  });

  it('maxInFlight: a request beyond it is refused and not remembered; after one settles it runs', () => {
    const clock = new SimulatedClock();
    const actor = createActor(serverSessionMachine, {
      clock,
      input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000, maxInFlight: 2 },
    }).start();
    const answers: unknown[] = [];
    actor.on('decision.request', (e) => answers.push(e.decision));
    actor.send({ type: 'request.received', requestKey: 'n:1' });
    actor.send({ type: 'request.received', requestKey: 'n:2' });
    actor.send({ type: 'request.received', requestKey: 'n:3' });
    // A re-sent id is still answered with its stream, even at the bound.
    actor.send({ type: 'request.received', requestKey: 'n:1' });
    expect(answers).toEqual([
      { kind: 'execute', stream: 1 },
      { kind: 'execute', stream: 2 },
      { kind: 'limited' },
      { kind: 'duplicate', stream: 1 },
    ]);
    expect(actor.getSnapshot().context.requests['n:3']).toBeUndefined();
    actor.send({ type: 'request.settled', requestKey: 'n:1' });
    actor.send({ type: 'request.received', requestKey: 'n:3' });
    expect(answers.at(-1)).toEqual({ kind: 'execute', stream: 3 });
  });

  describe('with a store shared by several instances', () => {
    it('sharedFacts changes with what every instance must agree on, not with local counts', async () => {
      const { sharedFacts } = await import('../machines/server/session.machine.js');
      const s = session(undefined, true);
      const facts = () => sharedFacts(s.actor.getSnapshot());
      const start = facts();
      s.actor.send({ type: 'stream.attached' });
      s.actor.send({ type: 'session.activity' });
      expect(facts()).toBe(start);
      s.actor.send({ type: 'request.received', requestKey: 'n:1', owner: 'a' });
      const admitted = facts();
      expect(admitted).not.toBe(start);
      s.actor.send({ type: 'request.settled', requestKey: 'n:1' });
      expect(facts()).toBe(admitted);
      s.actor.send({ type: 'standalone.requested' });
      expect(facts()).not.toBe(admitted);
      const opened = facts();
      s.actor.send({ type: 'session.delete' });
      expect(facts()).not.toBe(opened);
    });

    it('does not expire on its own idle clock: it asks how long the session was idle everywhere', () => {
      const s = session(undefined, true);
      s.clock.increment(1_000);
      expect(s.actor.getSnapshot().value).toEqual({ live: 'checkingExpiry' });
      expect(s.last()).toEqual({ type: 'expiry.due' });
      // Used on another instance 300 ms ago: wait out the remaining 300 ms only, then ask again.
      s.actor.send({ type: 'expiry.checked', idleMs: 700 });
      expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
      s.clock.increment(299);
      expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
      s.clock.increment(1);
      expect(s.actor.getSnapshot().value).toEqual({ live: 'checkingExpiry' });
      s.actor.send({ type: 'expiry.checked', idleMs: 1_000 });
      expect(s.actor.getSnapshot().value).toEqual({ ended: 'expired' });
      expect(s.last()).toEqual({ type: 'session.ended', reason: 'expired' });
    });

    it('woken past its TTL, it asks the store instead of expiring', () => {
      const s = session(undefined, true);
      const slept = createActor(serverSessionMachine, {
        snapshot: s.actor.getPersistedSnapshot(),
        input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000, sharedStore: true },
      }).start();
      slept.send({ type: 'session.woken', idleMs: 5_000 });
      expect(slept.getSnapshot().value).toEqual({ live: 'checkingExpiry' });
    });

    it('activity while the store is asked keeps the session, with a full TTL again', () => {
      const s = session(undefined, true);
      s.clock.increment(1_000);
      s.actor.send({ type: 'session.activity' });
      expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
      s.clock.increment(999);
      expect(s.actor.getSnapshot().value).toEqual({ live: 'idle' });
    });

    it('records which instance runs each request, for answering its calls if that instance dies', () => {
      const s = session(undefined, true);
      s.actor.send({ type: 'request.received', requestKey: 'n:1', owner: 'instance-a' });
      expect(s.actor.getSnapshot().context.streams[1]).toEqual({
        kind: 'request',
        requestKey: 'n:1',
        owner: 'instance-a',
      });
    });

    it('a snapshot adopted from the store is told what is attached and running here', () => {
      const s = session(undefined, true);
      s.actor.send({ type: 'request.received', requestKey: 'n:1', owner: 'elsewhere' });
      const adopted = createActor(serverSessionMachine, {
        snapshot: s.actor.getPersistedSnapshot(),
        input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000, sharedStore: true },
      }).start();
      adopted.send({ type: 'session.synced', attached: 0, running: {} });
      expect(adopted.getSnapshot().value).toEqual({ live: 'idle' });
      adopted.send({ type: 'session.synced', attached: 1, running: {} });
      expect(adopted.getSnapshot().value).toEqual({ live: 'busy' });
      adopted.send({ type: 'session.synced', attached: 0, running: { 's:here': 4 } });
      expect(adopted.getSnapshot().value).toEqual({ live: 'busy' });
      adopted.send({ type: 'request.settled', requestKey: 's:here' });
      expect(adopted.getSnapshot().value).toEqual({ live: 'idle' });
      // The request ids the other instance admitted are still duplicates here.
      const answers: unknown[] = [];
      adopted.on('decision.request', (e) => answers.push(e.decision));
      adopted.send({ type: 'request.received', requestKey: 'n:1', owner: 'here' });
      expect(answers).toEqual([{ kind: 'duplicate', stream: 1 }]);
    });

    it('ends its copy when another instance ended the session, with that reason', () => {
      const expired = session(undefined, true);
      expired.actor.send({ type: 'session.gone', reason: 'expired' });
      expect(expired.last()).toEqual({ type: 'session.ended', reason: 'expired' });
      const terminated = session(undefined, true);
      terminated.actor.send({ type: 'session.gone', reason: 'terminated' });
      expect(terminated.actor.getSnapshot().value).toEqual({ ended: 'terminated' });
    });
  });
});
