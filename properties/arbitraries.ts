import fc from 'fast-check';
import { TOOL_NAMES } from './world/tools.js';
import type { Command, WorldConfig } from './world/world.js';

/** Random fault schedules. Picks are positions (`nat`), so commands stay valid while shrinking. */
export const callArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...TOOL_NAMES).map((tool) => ({ kind: 'call', tool }) as const) },
  // The tools that charge and that overflow a small log, more often.
  {
    weight: 2,
    arbitrary: fc
      .constantFrom('charge', 'chatty', 'slow', 'bulky')
      .map((tool) => ({ kind: 'call', tool }) as const),
  },
);

export const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 5, arbitrary: callArb },
  {
    weight: 5,
    arbitrary: fc
      .oneof(
        // Short steps land faults inside a request's life (between its run and its first byte, mid-stream).
        { weight: 4, arbitrary: fc.integer({ min: 1, max: 60 }) },
        { weight: 4, arbitrary: fc.integer({ min: 1, max: 6_000 }) },
        // Now and then longer than an idle TTL: inside a long partition, sessions expire.
        { weight: 2, arbitrary: fc.integer({ min: 20_000, max: 70_000 }) },
      )
      .map((ms) => ({ kind: 'advance', ms }) as const),
  },
  { weight: 3, arbitrary: fc.nat(7).map((pick) => ({ kind: 'reset', pick }) as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'resetAll' } as const) },
  {
    weight: 1,
    // Transient statuses, and 401 (an expired token: the client's provider refreshes it). A refusal (403)
    // is in the directed corpus and the open findings.
    arbitrary: fc
      .tuple(fc.integer({ min: 1, max: 4 }), fc.constantFrom(503, 503, 502, 429, 401))
      .map(([count, status]) => ({ kind: 'serverError', count, status }) as const),
  },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'endStream', pick }) as const) },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'stall', pick }) as const) },
  { weight: 1, arbitrary: fc.nat(7).map((pick) => ({ kind: 'trickle', pick }) as const) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: 100, max: 20_000 }).map((ms) => ({ kind: 'partition', ms }) as const),
  },
  // Longer than an idle TTL or every reconnect attempt: sessions expire, streams give up.
  {
    weight: 2,
    arbitrary: fc.integer({ min: 30_000, max: 60_000 }).map((ms) => ({ kind: 'partition', ms }) as const),
  },
  { weight: 1, arbitrary: fc.boolean().map((durable) => ({ kind: 'serverRestart', durable }) as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'serverRestart', durable: false, graceful: true } as const) },
  { weight: 1, arbitrary: fc.boolean().map((durable) => ({ kind: 'clientRestart', durable }) as const) },
  { weight: 2, arbitrary: fc.constant({ kind: 'serverNotify' } as const) },
  { weight: 1, arbitrary: fc.constant({ kind: 'closeAndReconnect' } as const) },
  // A second principal holding the session's id: it must be told the session does not exist.
  { weight: 1, arbitrary: fc.constant({ kind: 'strangerDelete' } as const) },
  // The log refuses a call's answer as the tool finishes (outcome unknown, never a failure), and maybe the
  // outcome-unknown answer too (stored again later: a resume finds it, no call hangs).
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 2 }).map((count) => ({ kind: 'storeFails', count }) as const),
  },
);

/**
 * Up to 40 commands, drawn across the whole range (`size: 'max'`; the default size stops near 10), with
 * at least one call: a schedule without one makes "at most once" and "no hang" vacuous.
 */
export const scheduleArb: fc.Arbitrary<Command[]> = fc
  .tuple(callArb, fc.array(commandArb, { maxLength: 39, size: 'max' }), fc.nat())
  .map(([call, rest, at]) => {
    const i = at % (rest.length + 1);
    return [...rest.slice(0, i), call, ...rest.slice(i)];
  });

export const worldConfigArb: fc.Arbitrary<WorldConfig> = fc.record({
  heartbeat: fc.boolean(),
  // Small logs most of the time, so a resume after an absence often gets a 410 with an exact count.
  maxEventsPerStream: fc.oneof(
    { weight: 3, arbitrary: fc.integer({ min: 2, max: 4 }) },
    { weight: 1, arbitrary: fc.integer({ min: 5, max: 12 }) },
  ),
  retentionMs: fc.constantFrom(5_000, 60_000),
  idleTtlMs: fc.constantFrom(30_000, 120_000),
  coalesce: fc.boolean(),
  latencyMaxMs: fc.constantFrom(1, 10, 40),
  seed: fc.nat(),
  dedupe: fc.boolean(),
  replayOverlap: fc.constantFrom(0, 0, 1, 3),
  // Now and then a server that answers the standalone GET 404 while it serves POSTs (issue 22).
  standaloneNotFound: fc.constantFrom(false, false, false, false, false, true),
  // Now and then a server that leaves finished responses open: the client's drain deadline frees them.
  lingers: fc.constantFrom(false, false, false, true),
});

/**
 * Templates for decisions random schedules reach in about one world in a thousand; each is followed by
 * a random schedule. A session expires while the client is cut off, with calls made meanwhile, and
 * sometimes the network goes down again right after the 404, so the re-initialize fails too.
 */
export const expiryArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    callArb,
    fc.integer({ min: 1, max: 3_000 }),
    fc.integer({ min: 35_000, max: 80_000 }),
    fc.integer({ min: 31_000, max: 40_000 }),
    fc.array(callArb, { minLength: 1, maxLength: 3 }),
    fc.option(fc.integer({ min: 20, max: 400 }), { nil: undefined }),
    fc.array(commandArb, { maxLength: 20, size: 'max' }),
  )
  .map(([first, wait, cut, idle, during, cutAgainAfter, rest]) => [
    first,
    { kind: 'advance', ms: wait } as const,
    { kind: 'partition', ms: cut } as const,
    { kind: 'advance', ms: idle } as const,
    ...during,
    ...(cutAgainAfter === undefined
      ? []
      : ([
          { kind: 'advance', ms: cut - idle + cutAgainAfter },
          { kind: 'partition', ms: 60_000 },
          { kind: 'advance', ms: 60_000 },
        ] as const)),
    ...rest,
  ]);

/** A chatty call whose stream is cut while it appends more than a small log holds: a 410 with a count. */
export const evictionArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    fc.integer({ min: 1, max: 150 }),
    fc.oneof(
      fc.nat(7).map((pick) => ({ kind: 'reset', pick }) as const),
      fc.integer({ min: 200, max: 3_000 }).map((ms) => ({ kind: 'partition', ms }) as const),
      fc.constant({ kind: 'resetAll' } as const),
    ),
    fc.array(commandArb, { maxLength: 20, size: 'max' }),
  )
  .map(([wait, cut, rest]) => [
    { kind: 'call', tool: 'chatty' } as const,
    { kind: 'advance', ms: wait } as const,
    cut,
    ...rest,
  ]);

/** The server sends before the client's first GET (right after its initialize): those must be kept for it. */
export const earlyNotifyArb: fc.Arbitrary<Command[]> = fc
  .tuple(fc.integer({ min: 1, max: 40 }), callArb, fc.array(commandArb, { maxLength: 20, size: 'max' }))
  .map(([wait, call, rest]) => [
    { kind: 'advance', ms: wait } as const,
    { kind: 'serverNotify' } as const,
    call,
    ...rest,
  ]);

/**
 * A token expires while a call runs: its stream is cut, and the resumes meet 401s, sometimes more than the
 * provider's authorizations may answer (the call then waits for the user, see authorization.ts).
 */
export const tokenExpiryArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    fc.constantFrom('charge', 'chatty', 'slow'),
    fc.integer({ min: 1, max: 60 }),
    // Mostly more 401s than one stream's authorizations, so the exhausted rows are reached too.
    fc.constantFrom(1, 2, 3, 4, 4, 4),
    fc.array(commandArb, { maxLength: 20, size: 'max' }),
  )
  .map(([tool, wait, count, rest]) => [
    { kind: 'call', tool } as const,
    { kind: 'advance', ms: wait } as const,
    { kind: 'resetAll' } as const,
    { kind: 'serverError', count, status: 401 } as const,
    ...rest,
  ]);

/**
 * The server loses a session the client has not yet heard about (a restart without a durable log, or an
 * expiry while the client is cut off), and the application closes its transport right then: its DELETE
 * names a session the server no longer has.
 */
export const closeAfterLossArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    callArb,
    fc.integer({ min: 1, max: 3_000 }),
    fc.oneof(
      fc.constant([{ kind: 'serverRestart', durable: false } as const]),
      fc
        .integer({ min: 35_000, max: 60_000 })
        .map((ms) => [{ kind: 'partition', ms } as const, { kind: 'advance', ms: ms + 10 } as const]),
    ),
    fc.array(commandArb, { maxLength: 20, size: 'max' }),
  )
  .map(([call, wait, loss, rest]) => [
    call,
    { kind: 'advance', ms: wait } as const,
    ...loss,
    { kind: 'closeAndReconnect' } as const,
    ...rest,
  ]);

/**
 * A call on a slow link after a random schedule: a large result trickling in for longer than the stall
 * timeout, or a call whose stream a proxy turns into a trickle of bytes that complete nothing. Only the
 * progress rule (machines/client/progress.ts) tells the first (alive) from the second (stalled).
 */
export const slowLinkArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    fc.array(commandArb, { maxLength: 15, size: 'max' }),
    fc.constantFrom('bulky', 'bulky', 'slow', 'chatty'),
    fc.integer({ min: 1, max: 300 }),
    fc.option(fc.nat(1), { nil: undefined }),
  )
  .map(([rest, tool, wait, trickle]) => [
    ...rest,
    { kind: 'call', tool } as const,
    { kind: 'advance', ms: wait } as const,
    ...(trickle === undefined ? [] : [{ kind: 'trickle', pick: trickle } as const]),
  ]);

/**
 * The application gives up on a call while it runs (the SDK's request timeout, or an abort): it sends
 * `notifications/cancelled`, and its `send` must settle at once, since the server will not answer it.
 */
export const cancelArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    fc.array(commandArb, { maxLength: 10, size: 'max' }),
    callArb,
    fc.integer({ min: 1, max: 400 }),
    fc.nat(3),
    fc.array(commandArb, { maxLength: 10, size: 'max' }),
  )
  .map(([before, call, wait, pick, rest]) => [
    ...before,
    call,
    { kind: 'advance', ms: wait } as const,
    { kind: 'cancel', pick } as const,
    ...rest,
  ]);

/**
 * The network goes down while the application's DELETE is on its way (it closes, then a partition holds
 * the DELETE until it heals): `close()` must return by its own deadline, not when the network comes back.
 */
export const closeIntoPartitionArb: fc.Arbitrary<Command[]> = fc
  .tuple(
    callArb,
    fc.integer({ min: 1, max: 3_000 }),
    fc.integer({ min: 6_000, max: 30_000 }),
    fc.array(commandArb, { maxLength: 10, size: 'max' }),
  )
  .map(([call, wait, cut, rest]) => [
    call,
    { kind: 'advance', ms: wait } as const,
    { kind: 'closeAndReconnect' } as const,
    { kind: 'partition', ms: cut } as const,
    ...rest,
  ]);

export const scenarioArb = fc.record({
  config: worldConfigArb,
  commands: fc.oneof(
    { weight: 8, arbitrary: scheduleArb },
    { weight: 1, arbitrary: expiryArb },
    { weight: 1, arbitrary: evictionArb },
    { weight: 1, arbitrary: earlyNotifyArb },
    { weight: 1, arbitrary: tokenExpiryArb },
    { weight: 1, arbitrary: closeAfterLossArb },
    { weight: 1, arbitrary: slowLinkArb },
    { weight: 1, arbitrary: cancelArb },
    { weight: 1, arbitrary: closeIntoPartitionArb },
  ),
});
