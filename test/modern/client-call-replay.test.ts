import { fc, test } from '@fast-check/vitest';
import { describe, expect } from 'vitest';
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import {
  type AttemptInput,
  type ModernCallEvent,
  modernCallMachine,
} from '../../machines/client/modern-call.machine.js';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../machines/jsonrpc.js';

/**
 * "No message delivered twice", as a property: a keyed call whose stream is cut after any number of events,
 * any number of times (within the budget), against a server that replays from the re-issue's
 * `lastEventId` — and, as a proxy or a sloppy server may, resends up to a few events the client already
 * has. Whatever the schedule, the application receives the call's events exactly once each, in order, then
 * the answer once, with its own id and progress token.
 */

const CALL: JsonRpcRequest = {
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'charge', arguments: {}, _meta: { progressToken: 1 } },
};

const metaOf = (a: AttemptInput) => (a.request.params?._meta ?? {}) as Record<string, unknown>;

const schedule = fc.record({
  events: fc.integer({ min: 0, max: 12 }),
  // Per attempt: how many new events it gets through before the cut, and how many old ones it resends.
  attempts: fc.array(fc.record({ fresh: fc.nat(5), resent: fc.nat(3) }), { minLength: 0, maxLength: 3 }),
  finalResent: fc.nat(3),
});

describe('the call machine never delivers a message twice', () => {
  test.prop([schedule], { numRuns: 300 })('over any schedule of cuts and replays', (s) => {
    const clock = new SimulatedClock();
    const attempts: AttemptInput[] = [];
    const delivered: JsonRpcMessage[] = [];
    const machine = modernCallMachine.provide({
      actors: {
        exchange: fromCallback<ModernCallEvent, AttemptInput>(({ input }) => {
          attempts.push(input);
        }),
      },
      actions: { deliver: (_, { message }) => delivered.push(message) },
    });
    const actor = createActor(machine, {
      clock,
      input: {
        request: CALL,
        extension: { memoWindowMs: 86_400_000 },
        idempotencyKey: 'key-1',
        stallTimeoutMs: 0,
        startedAt: 0,
        jitterSeed: 3,
      },
    });
    actor.start();
    let at = 0;
    const eventId = (n: number) => `key-1-${n}`;
    // The server's log position: what the re-issue's lastEventId says the client has.
    const resumeFrom = (a: AttemptInput): number => {
      const last = metaOf(a)[ContinuityMeta.lastEventId];
      return typeof last === 'string' ? Number(last.split('-').at(-1)) : 0;
    };
    const play = (a: AttemptInput, resent: number, fresh: number, answer: boolean) => {
      const from = resumeFrom(a);
      const token = metaOf(a).progressToken;
      for (let n = Math.max(1, from - resent + 1); n <= Math.min(s.events, from + fresh); n++) {
        actor.send({
          type: 'attempt.message',
          at: ++at,
          eventId: eventId(n),
          message: {
            jsonrpc: '2.0',
            method: 'notifications/progress',
            params: { progressToken: token, progress: n },
          },
        });
      }
      if (answer) {
        actor.send({
          type: 'attempt.message',
          at: ++at,
          eventId: eventId(s.events + 1),
          message: { jsonrpc: '2.0', id: a.request.id, result: { resultType: 'complete', content: [] } },
        });
      } else {
        actor.send({ type: 'attempt.ended', at: ++at, end: { kind: 'cut-mid-stream' } });
        clock.increment(60_000);
      }
    };
    for (const step of s.attempts) play(attempts.at(-1) as AttemptInput, step.resent, step.fresh, false);
    play(attempts.at(-1) as AttemptInput, s.finalResent, s.events, true);

    const out = actor.getSnapshot().output;
    expect(out?.outcome).toBe('answered');
    const progress = delivered.filter((m) => 'method' in m);
    expect(progress.map((m) => (m as unknown as { params: { progress: number } }).params.progress)).toEqual(
      Array.from({ length: s.events }, (_, i) => i + 1),
    );
    expect(
      progress.every(
        (m) => (m as unknown as { params: { progressToken: unknown } }).params.progressToken === 1,
      ),
    ).toBe(true);
    const answers = delivered.filter((m) => !('method' in m));
    expect(answers).toEqual([{ jsonrpc: '2.0', id: 1, result: { resultType: 'complete', content: [] } }]);
    expect(delivered.at(-1)).toEqual(answers[0]);
    // Every attempt had its own id; every re-issue carried the key.
    expect(new Set(attempts.map((a) => a.request.id)).size).toBe(attempts.length);
    for (const a of attempts) expect(metaOf(a)[ContinuityMeta.idempotencyKey]).toBe('key-1');
  });
});
