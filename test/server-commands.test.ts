import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { JsonRpcCode, OutcomeUnknownReason, ResumeRejection } from '../machines/codes.js';
import { formatEventId } from '../machines/event-id.js';
import { namesSession, routeCall, sessionUnavailable } from '../machines/server/call-routing.js';
import { askMachine, executePlan, type PlanIo } from '../machines/server/execute-plan.js';
import {
  abandonedCalls,
  announcesEnd,
  expiryEvent,
  foreignOwners,
  isOwnerAlive,
  leaseRead,
  outcomeUnknownReason,
  ownerLostOn,
} from '../machines/server/instances.js';
import { DEFAULT_SERVER_LIMITS } from '../machines/server/limits.js';
import { errorBody, resumeRejected, SESSION_NOT_FOUND } from '../machines/server/replies.js';
import { appendToWindow, EMPTY_WINDOW, finishWindow } from '../machines/server/retention.js';
import { serverSessionMachine } from '../machines/server/session.machine.js';
import {
  cursorStream,
  planMessage,
  planRequest,
  planResume,
  planStandalone,
  replayStep,
  routeOutbound,
} from '../machines/server/session-commands.js';

const limits = DEFAULT_SERVER_LIMITS;
const alone = { sharedStore: false };
const sharing = { sharedStore: true };

describe('session commands: what a session does with its machine answer', () => {
  it('a new request: activity, run here, open and persist its stream, then prime, attach, execute', () => {
    expect(planRequest({ kind: 'execute', stream: 3 }, 'n:7', alone, limits)).toEqual({
      kind: 'stream',
      prepare: [
        { kind: 'record-activity' },
        { kind: 'run-here', requestKey: 'n:7', stream: 3 },
        { kind: 'open-stream', stream: 3 },
        { kind: 'persist' },
      ],
      respond: [
        { kind: 'prime', stream: 3, seq: 0 },
        { kind: 'attach', stream: 3, afterSeq: 0, readBack: false },
        { kind: 'execute', requestKey: 'n:7', stream: 3 },
      ],
    });
  });

  it('sharing a store, the decision itself commits the record and opens its stream: nothing apart', () => {
    const plan = planRequest({ kind: 'execute', stream: 3 }, 'n:7', sharing, limits);
    expect(plan.kind === 'stream' && plan.prepare.map((c) => c.kind)).toEqual([
      'record-activity',
      'run-here',
    ]);
    const standalone = planStandalone({ kind: 'attach', stream: 0, from: 'start' }, sharing);
    expect(standalone.kind === 'stream' && standalone.prepare.some((c) => c.kind === 'persist')).toBe(false);
  });

  it('a repeated id is answered by its stream replayed from its start, never run again', () => {
    expect(planRequest({ kind: 'duplicate', stream: 2 }, 'n:7', alone, limits)).toEqual({
      kind: 'resume',
      stream: 2,
      seq: 0,
      prepare: [{ kind: 'record-activity' }],
    });
  });

  it('an unknown session is 404, a full session 429 with Retry-After, and nothing else happens', () => {
    expect(planRequest({ kind: 'unknown-session' }, 'n:1', alone, limits)).toEqual({
      kind: 'error',
      error: SESSION_NOT_FOUND,
      prepare: [],
    });
    const limited = planRequest({ kind: 'limited' }, 'n:1', alone, { ...limits, retryAfterSeconds: 9 });
    expect(limited).toMatchObject({ kind: 'error', error: { status: 429, retryAfterSeconds: 9 } });
    expect(planStandalone({ kind: 'unknown-session' }, alone)).toEqual({
      kind: 'error',
      error: SESSION_NOT_FOUND,
      prepare: [],
    });
    expect(planMessage(false)).toEqual({ kind: 'error', error: SESSION_NOT_FOUND, prepare: [] });
    expect(planMessage(true)).toEqual({ kind: 'accept', prepare: [{ kind: 'record-activity' }] });
  });

  it('a resume replays after the cursor and stays attached; a refusal carries the answer', () => {
    expect(planResume({ kind: 'replay', stream: 4, afterSeq: 9 })).toEqual({
      kind: 'stream',
      prepare: [{ kind: 'record-activity' }],
      respond: [{ kind: 'retry' }, { kind: 'attach', stream: 4, afterSeq: 9, readBack: true }],
    });
    const gone = {
      kind: 'gone',
      reason: ResumeRejection.windowExceeded,
      stream: 4,
      requestedId: 'x',
      lostCount: 3,
      streamComplete: false,
    } as const;
    expect(planResume(gone)).toEqual({
      kind: 'error',
      error: {
        status: 410,
        code: JsonRpcCode.RESUME_REJECTED,
        message: 'Cannot resume: resume_window_exceeded (3 events lost)',
        data: gone,
      },
      prepare: [{ kind: 'record-activity' }],
    });
    const invalid = { kind: 'invalid', reason: ResumeRejection.malformedCursor, requestedId: 'x' } as const;
    expect(resumeRejected(invalid)).toMatchObject({ status: 400, data: invalid });
    expect(resumeRejected({ kind: 'unknown-session' })).toBe(SESSION_NOT_FOUND);
  });

  it('the standalone stream starts at 0 the first time, else at its head', () => {
    const first = planStandalone({ kind: 'attach', stream: 0, from: 'start' }, alone);
    const again = planStandalone({ kind: 'attach', stream: 0, from: 'head' }, alone);
    expect(first.kind === 'stream' && first.respond).toEqual([
      { kind: 'prime', stream: 0, seq: 0 },
      { kind: 'attach', stream: 0, afterSeq: 0, readBack: true },
    ]);
    expect(again.kind === 'stream' && again.respond).toEqual([
      { kind: 'prime', stream: 0, seq: 'head' },
      { kind: 'attach', stream: 0, afterSeq: 'head', readBack: true },
    ]);
  });

  it('a cursor of this epoch names the stream whose window the machine is given', () => {
    expect(cursorStream(formatEventId({ epoch: 'ep', stream: 3, seq: 5 }), 'ep')).toBe(3);
    expect(cursorStream(formatEventId({ epoch: 'old', stream: 3, seq: 5 }), 'ep')).toBeUndefined();
    expect(cursorStream('nonsense', 'ep')).toBeUndefined();
  });

  it('outbound: an answer finishes its running request stream, or is dropped; others follow their request', () => {
    const running = new Map([['n:5', 2]]);
    expect(routeOutbound({ jsonrpc: '2.0', id: 5, result: {} }, undefined, running)).toEqual({
      kind: 'final',
      stream: 2,
      requestKey: 'n:5',
    });
    expect(routeOutbound({ jsonrpc: '2.0', id: 6, result: {} }, undefined, running)).toEqual({
      kind: 'drop',
    });
    const note = { jsonrpc: '2.0' as const, method: 'notifications/progress' };
    expect(routeOutbound(note, 5, running)).toEqual({ kind: 'event', stream: 2 });
    expect(routeOutbound(note, 6, running)).toEqual({ kind: 'event', stream: 0 });
    expect(routeOutbound(note, undefined, running)).toEqual({ kind: 'event', stream: 0 });
  });

  it('replay writes only the next event in sequence, ends when finished or when events were lost', () => {
    let w = EMPTY_WINDOW;
    for (let i = 0; i < 4; i++)
      w = appendToWindow(w, 0, { maxEventsPerStream: 100, retentionMs: 1e9 }).window;
    const events = [1, 2, 4].map((seq) => ({ seq }));
    expect(replayStep(w, events, 0)).toEqual({ write: [{ seq: 1 }, { seq: 2 }], lastSent: 2 });
    expect(replayStep(finishWindow(w), [{ seq: 4 }], 3)).toEqual({
      write: [{ seq: 4 }],
      lastSent: 4,
      end: 'finished',
    });
    expect(replayStep({ ...w, oldest: 3 }, [{ seq: 3 }], 1)).toEqual({ write: [], lastSent: 1, end: 'lost' });
  });
});

describe('instances: who is alive, and what a call whose runner is gone gets', () => {
  it('one liveness rule: this instance, or a leased one; an unowned call is nobody’s after a restart', () => {
    const leased = new Set(['b']);
    expect(isOwnerAlive('a', 'a', leased)).toBe(true);
    expect(isOwnerAlive('b', 'a', leased)).toBe(true);
    expect(isOwnerAlive('c', 'a', leased)).toBe(false);
    expect(isOwnerAlive(undefined, 'a', leased)).toBe(false);
    expect(isOwnerAlive(undefined, undefined, new Set())).toBe(false);
  });

  it('foreign owners are the other instances running this session’s calls', () => {
    const streams = {
      0: { kind: 'standalone' },
      1: { kind: 'request', owner: 'a' },
      2: { kind: 'request', owner: 'b' },
    };
    expect(foreignOwners(streams, 'a')).toEqual(['b']);
    expect(foreignOwners(streams, 'a', [1])).toEqual([]);
  });

  it('an abandoned, unfinished call gets outcome unknown: server_restarted alone, instance_lost sharing', () => {
    expect(outcomeUnknownReason(false)).toBe(OutcomeUnknownReason.serverRestarted);
    expect(outcomeUnknownReason(true)).toBe(OutcomeUnknownReason.instanceLost);
    const streams = {
      1: { kind: 'request', requestKey: 'n:1', owner: 'gone' },
      2: { kind: 'request', requestKey: 's:x', owner: 'gone' },
      3: { kind: 'request', requestKey: 'n:3', owner: 'alive' },
    };
    const open = appendToWindow(EMPTY_WINDOW, 0, { maxEventsPerStream: 9, retentionMs: 9 }).window;
    const windowOf = (n: number) => (n === 2 ? finishWindow(open) : open);
    const calls = abandonedCalls(streams, windowOf, (o) => o === 'alive', true);
    expect(calls).toEqual([
      {
        stream: 1,
        requestKey: 'n:1',
        reason: OutcomeUnknownReason.instanceLost,
        answer: expect.objectContaining({
          id: 1,
          error: expect.objectContaining({
            code: JsonRpcCode.OUTCOME_UNKNOWN,
            data: { reason: OutcomeUnknownReason.instanceLost },
          }),
        }),
      },
    ]);
    expect(abandonedCalls(streams, windowOf, () => false, false, new Set([3])).map((c) => c.stream)).toEqual([
      3,
    ]);
  });

  it('a lease read declares lost only an owner it asked about: one attached or adopted after it was sent is not', () => {
    // The read was sent for the owners of the streams attached then (b, c); stream 3, run by d, was
    // attached (or adopted from another instance's commit) while it was in flight. d is alive: the read
    // said nothing of it. Deciding with the read's leased set alone answered d's live call instance_lost.
    const read = leaseRead(['b', 'c'], new Set(['b']));
    expect(ownerLostOn('a', 'a', read)).toBe(false);
    expect(ownerLostOn('b', 'a', read)).toBe(false);
    expect(ownerLostOn('c', 'a', read)).toBe(true);
    expect(ownerLostOn('d', 'a', read)).toBe(false);
    expect(ownerLostOn(undefined, 'a', read)).toBe(true);
    const streams = {
      1: { kind: 'request', requestKey: 'n:1', owner: 'b' },
      2: { kind: 'request', requestKey: 'n:2', owner: 'c' },
      3: { kind: 'request', requestKey: 'n:3', owner: 'd' },
    };
    const open = appendToWindow(EMPTY_WINDOW, 0, { maxEventsPerStream: 9, retentionMs: 9 }).window;
    const lost = (alive: (o: string | undefined) => boolean) =>
      abandonedCalls(streams, () => open, alive, true).map((c) => c.stream);
    expect(lost((o) => !ownerLostOn(o, 'a', read))).toEqual([2]);
    // The rule it replaces, for contrast: d's live call is reaped.
    expect(lost((o) => isOwnerAlive(o, 'a', read.leased))).toEqual([2, 3]);
  });

  it('the expiry read: idle time goes to the machine, a missing record ends it, a failed read counts as in use', () => {
    expect(expiryEvent({ kind: 'idle', idleMs: 40 })).toEqual({ type: 'expiry.checked', idleMs: 40 });
    expect(expiryEvent({ kind: 'failed' })).toEqual({ type: 'expiry.checked', idleMs: 0 });
    expect(expiryEvent({ kind: 'missing' })).toEqual({ type: 'session.gone', reason: 'terminated' });
  });

  it('an end is announced only where it was decided, and never for a stop', () => {
    expect(announcesEnd({ sharedStore: true, endedElsewhere: false, reason: 'expired' })).toBe(true);
    expect(announcesEnd({ sharedStore: true, endedElsewhere: true, reason: 'expired' })).toBe(false);
    expect(announcesEnd({ sharedStore: true, endedElsewhere: false, reason: 'shutdown' })).toBe(false);
    expect(announcesEnd({ sharedStore: false, endedElsewhere: false, reason: 'terminated' })).toBe(false);
  });
});

describe('call routing and replies', () => {
  it('routes an admitted call to its session operation, 404 for an unknown session', () => {
    const route = (
      method: string,
      posted: 'initialize' | 'request' | 'notification' | undefined,
      found: boolean,
      last: string | null = null,
    ) => routeCall({ method, posted, sessionFound: found, lastEventId: last }).kind;
    expect(route('POST', 'initialize', false)).toBe('create-session');
    expect(route('POST', 'request', true)).toBe('request');
    expect(route('POST', 'notification', true)).toBe('accept');
    expect(route('DELETE', undefined, true)).toBe('delete');
    expect(route('GET', undefined, true)).toBe('standalone');
    expect(routeCall({ method: 'GET', sessionFound: true, lastEventId: 'c' })).toEqual({
      kind: 'resume',
      lastEventId: 'c',
    });
    expect(routeCall({ method: 'GET', sessionFound: false, lastEventId: 'c' })).toEqual({
      kind: 'not-found',
      resume: true,
    });
    expect(routeCall({ method: 'POST', posted: 'request', sessionFound: false, lastEventId: null })).toEqual({
      kind: 'not-found',
      resume: false,
    });
    expect(namesSession('POST', 'initialize')).toBe(false);
    expect(namesSession('GET', undefined)).toBe(true);
  });

  it('a session ended on the way: 404, or 503 when a stopping process released it', () => {
    expect(sessionUnavailable(false)).toBe(SESSION_NOT_FOUND);
    expect(sessionUnavailable(true)).toMatchObject({ status: 503 });
  });

  it('one error body shape, data only when given', () => {
    expect(errorBody(-1, 'm')).toEqual({ jsonrpc: '2.0', id: null, error: { code: -1, message: 'm' } });
    expect(errorBody(-1, 'm', { a: 1 })).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -1, message: 'm', data: { a: 1 } },
    });
  });
});

describe('executePlan: one executor, synchronous or not as its I/O is', () => {
  const record = (async: boolean, failOpen = false, failAttach = false) => {
    const log: string[] = [];
    const readers = new Map<number, string>([[0, 'old-sink']]);
    const step = (entry: string, fail = false) => {
      log.push(entry);
      if (fail) {
        if (async) return Promise.reject(new Error(entry));
        throw new Error(entry);
      }
      return async ? Promise.resolve() : undefined;
    };
    const io: PlanIo<string, string> = {
      epoch: 'ep',
      recordActivity: () => void log.push('activity'),
      runHere: (key, stream) => void log.push(`run-here ${key} ${stream}`),
      openStream: (stream) => step(`open-stream ${stream}`, failOpen),
      persist: () => step('persist'),
      unanswered: (key, cause) => void log.push(`unanswered ${key} ${cause}`),
      head: () => (async ? Promise.resolve(7) : 7),
      reply: (error) => `reply ${error.status}`,
      accepted: () => 'reply 202',
      resume: (id) => `resume ${id}`,
      // As the runtime's response does: a start that fails ends the response.
      open: (start) => {
        try {
          const started = start('sink');
          if (started instanceof Promise) started.catch(() => log.push('response ended'));
        } catch {
          log.push('response ended');
        }
        return 'sse';
      },
      prime: (sink, stream, seq) => void log.push(`prime ${sink} ${stream} ${seq}`),
      retry: () => void log.push('retry'),
      readerOf: (stream) => readers.get(stream),
      endReader: (stream, reader) => void log.push(`end ${reader} on ${stream}`),
      attach: (sink, stream, after, readBack) => {
        readers.set(stream, sink);
        return step(`attach ${stream} ${after} ${readBack}`, failAttach);
      },
      execute: (key) => void log.push(`execute ${key}`),
    };
    return { log, io };
  };

  it('runs a new request in order, the same whether the I/O is synchronous or not', async () => {
    const plan = planRequest({ kind: 'execute', stream: 3 }, 'n:7', alone, limits);
    const sync = record(false);
    expect(executePlan(plan, sync.io)).toBe('sse');
    const async = record(true);
    expect(await executePlan(plan, async.io)).toBe('sse');
    await new Promise((r) => setTimeout(r, 0));
    const expected = [
      'activity',
      'run-here n:7 3',
      'open-stream 3',
      'persist',
      'prime sink 3 0',
      'attach 3 0 false',
      'execute n:7',
    ];
    expect(sync.log).toEqual(expected);
    expect(async.log).toEqual(expected);
  });

  it('a standalone stream from its head is primed and attached at the head, ending its previous reader', () => {
    const { log, io } = record(false);
    executePlan(planStandalone({ kind: 'attach', stream: 0, from: 'head' }, alone), io);
    expect(log).toEqual([
      'activity',
      'open-stream 0',
      'persist',
      'prime sink 0 7',
      'end old-sink on 0',
      'attach 0 7 true',
    ]);
  });

  it('a repeated id resumes its stream from seq 0; an error replies after its bookkeeping', () => {
    const { log, io } = record(false);
    expect(executePlan(planRequest({ kind: 'duplicate', stream: 2 }, 'n:7', alone, limits), io)).toBe(
      `resume ${formatEventId({ epoch: 'ep', stream: 2, seq: 0 })}`,
    );
    expect(executePlan(planRequest({ kind: 'unknown-session' }, 'n:7', alone, limits), io)).toBe('reply 404');
    expect(executePlan(planMessage(true), io)).toBe('reply 202');
    expect(log).toEqual(['activity', 'activity']);
  });

  it('a request whose stream cannot be stored is settled as failed, and the error goes on', async () => {
    const plan = planRequest({ kind: 'execute', stream: 3 }, 'n:7', alone, limits);
    const sync = record(false, true);
    expect(() => executePlan(plan, sync.io)).toThrow('open-stream 3');
    expect(sync.log.at(-1)).toBe('unanswered n:7 failed');
    const async = record(true, true);
    await expect(executePlan(plan, async.io)).rejects.toThrow('open-stream 3');
    expect(async.log.at(-1)).toBe('unanswered n:7 failed');
  });

  it('a request whose response fails before it reaches the SDK server is settled as failed', async () => {
    const plan = planRequest({ kind: 'execute', stream: 3 }, 'n:7', alone, limits);
    const sync = record(false, false, true);
    executePlan(plan, sync.io);
    expect(sync.log.slice(-2)).toEqual(['unanswered n:7 failed', 'response ended']);
    expect(sync.log).not.toContain('execute n:7');
    const async = record(true, false, true);
    await executePlan(plan, async.io);
    await new Promise((r) => setTimeout(r, 0));
    expect(async.log.slice(-2)).toEqual(['unanswered n:7 failed', 'response ended']);
    expect(async.log).not.toContain('execute n:7');
  });

  it('asks the machine and returns its answer of the type asked for', () => {
    const actor = createActor(serverSessionMachine, {
      input: { sessionId: 'S', epoch: 'ep', idleTtlMs: 1_000 },
    });
    actor.start();
    expect(
      askMachine(actor, { type: 'request.received', requestKey: 'n:1' }, 'decision.request').decision,
    ).toEqual({
      kind: 'execute',
      stream: 1,
    });
    expect(() => askMachine(actor, { type: 'session.activity' }, 'decision.request')).toThrow(
      /no decision.request/,
    );
    actor.stop();
  });
});
