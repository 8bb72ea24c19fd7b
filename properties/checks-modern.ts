import { ModernCallReason } from '../machines/client/modern-call-decide.js';
import { ContinuityMeta } from '../machines/continuity-extension.js';
import { leaseTickMs } from '../machines/server/keyed-timing.js';
import { COMMON_CHECKS, ownerDied, type TraceCheck } from './checks/common.js';
import type { CallTrace, ExcuseRules, Trace } from './checks/trace.js';
import { SIM_MODERN_CALL_POLICY } from './world-modern/client.js';
import { TRICKLE_MS } from './world-modern/link.js';
import type { CallRecordModern, ModernRecorder } from './world-modern/recorder.js';
import { LEASE_MS_MODERN } from './world-modern/server.js';
import { type ModernTool, TOOLS_MODERN } from './world-modern/tools.js';
import { type ModernWorldOutcome, STALL_MODERN_MS } from './world-modern/world.js';

/**
 * The invariants of the 2026-07-28 model, judged from the outside on what the world recorded: the same
 * properties as the 2025 model (checks.ts). Each returns its violations (empty: holds).
 */
export type CheckModern = (outcome: ModernWorldOutcome) => string[];

/** Tools a re-issue of which cannot duplicate a side effect, by their annotations. */
export const safeByAnnotations = (tool: string): boolean => {
  const a = TOOLS_MODERN[tool as ModernTool]?.annotations as {
    readOnlyHint?: boolean;
    idempotentHint?: boolean;
  };
  return a?.readOnlyHint === true || a?.idempotentHint === true;
};

/** Reasons the table gives when a re-issue might duplicate: honest only when no re-issue is safe. */
const MAY_HAVE_RUN = new Set<string>([
  ModernCallReason.cutBeforeResponse,
  ModernCallReason.cutMidStream,
  ModernCallReason.endedWithoutAnswer,
  ModernCallReason.stalled,
  ModernCallReason.serverError,
  ModernCallReason.gatewayError,
]);

/**
 * What the 2026 client's reasons blame. `server_outcome_unknown` blames a death or an earlier attempt
 * (judged in `unexplained`, with the shared `ownerDied`); sessions do not exist in this era.
 */
export const RULES_MODERN: ExcuseRules = {
  unsafeToResend: MAY_HAVE_RUN,
  instanceDied: new Set(),
  sessionEndCauses: new Set(),
  onlyWhileIdle: new Set(),
};

const traces = new WeakMap<ModernRecorder, Trace>();

/** The model's recorder as the neutral trace (computed once per world). */
export function traceOfModern({ recorder, hung }: ModernWorldOutcome): Trace {
  const cached = traces.get(recorder);
  if (cached) return cached;
  const calls = new Map<string, CallTrace>();
  for (const c of recorder.calls.values())
    calls.set(c.callKey, {
      key: c.callKey,
      tool: c.tool,
      at: c.at,
      // The call machine is given the tool's annotations with the call.
      resendable: safeByAnnotations(c.tool),
      // An aborted call has no outcome: the application stopped waiting for one ('aborts end as aborted').
      outcome: c.outcome === 'aborted' ? undefined : c.outcome,
      reason: c.reason,
      settledAt: c.endedAt,
      outcomes: c.outcomes,
      abandoned: c.outcome === 'aborted',
      owners: recorder.owners.get(c.callKey) ?? [],
    });
  const trace: Trace = {
    calls,
    executions: recorder.executions,
    sideEffects: recorder.sideEffects,
    hung,
    sessionEnds: [],
    deaths: recorder.instanceDeaths,
    evictions: recorder.evictions,
  };
  traces.set(recorder, trace);
  return trace;
}

const onModel =
  (check: TraceCheck): CheckModern =>
  (outcome) =>
    check(traceOfModern(outcome), RULES_MODERN);

/** A charge never runs twice for one application call. */
export const atMostOnceModern: CheckModern = onModel(COMMON_CHECKS['at most once']);

/**
 * Honest errors: a call reported definitely failed never ran; and a result is the call's own (it comes
 * from an execution of this call that ran to its end, never from another call's record).
 */
export const honestErrorsModern: CheckModern = (outcome) => {
  const { recorder } = outcome;
  const out = COMMON_CHECKS['honest errors'](traceOfModern(outcome), RULES_MODERN);
  for (const c of recorder.calls.values()) {
    if (c.outcome === 'result') {
      const from = recorder.resultFrom.get(c.callKey);
      if (!from || !(recorder.completed.get(c.callKey) ?? []).includes(from))
        out.push(`${c.callKey} (${c.tool}) got a result its own execution never produced (from ${from})`);
    }
  }
  return out;
};

/**
 * No spurious outcome unknown, no spurious failure: a call ends outcome unknown or failed only for a reason
 * the world gave it ('the real result after the faults' judges the calls made after the last fault).
 */
export const noSpuriousOutcomeUnknownModern: CheckModern = (outcome) => {
  const { recorder, config } = outcome;
  const trace = traceOfModern(outcome);
  const out: string[] = [];
  for (const c of recorder.calls.values()) {
    if (c.outcome === undefined || c.outcome === 'result' || c.outcome === 'aborted') continue;
    const why = unexplained(recorder, trace, c, config.extension, config.memoWindowMs);
    if (why !== undefined) out.push(`${c.callKey} (${c.tool}) ${c.outcome} (${c.reason}): ${why}`);
  }
  return out;
};

/**
 * What 'the real result after the faults' reads beside the trace; the model and the real-stack world each
 * say it of what they saw.
 */
export interface AfterTheFaults {
  /** When the world's last fault ended. */
  readonly lastFaultAt: number;
  /**
   * The world has weather it does not count as faults (on the real stack: latency, the balancer's idle
   * cuts). Then a call without the extension may lose its answer to it (unjudged), and a first attempt may
   * be lost before reaching a memory memo, whose re-issue of a key it never saw is outcome unknown (§4).
   * The model records every cut as a fault: there neither excuse applies.
   */
  readonly weather: boolean;
  /** What keeps the keys: nothing (no extension), a memory memo (younger than its window), a durable one. */
  readonly memo: 'none' | 'memory' | 'durable';
  /** Tool bodies started per call, any tool. */
  readonly starts: ReadonlyMap<string, number>;
  /**
   * Calls the server refused for the application's own doing (it reused a key; its principal or address
   * reached its bound; another call sharing its key cancelled it), with why: their own checks judge them
   * ('keys stay with their principal', 'bounds are per principal', 'cancels are honoured').
   */
  readonly ownDoing: ReadonlyMap<string, string>;
}

/**
 * The real result after the faults: with nothing left to break it, a call made after the last fault ends
 * with its result (the model and the real-stack world judge this with this one function).
 */
export function realResultAfterFaults(t: Trace, w: AfterTheFaults): string[] {
  if (w.weather && w.memo === 'none') return [];
  return [...t.calls.values()]
    .filter((c) => c.at > w.lastFaultAt && c.outcome !== 'result' && !c.abandoned && !w.ownDoing.has(c.key))
    .filter((c) => !(w.weather && w.memo === 'memory' && c.outcome === 'unknown' && !w.starts.get(c.key)))
    .map(
      (c) =>
        `${c.key} (${c.tool}) began at ${c.at}ms, after the last fault (${w.lastFaultAt}ms), but ended ` +
        `${c.outcome ?? 'nothing'}${c.reason === undefined ? '' : ` (${c.reason})`}`,
    );
}

/** The model's `AfterTheFaults`: every cut is a fault it recorded. */
export const realResultAfterFaultsModern: CheckModern = (outcome) => {
  const { recorder, config } = outcome;
  const ownDoing = new Map<string, string>();
  for (const c of recorder.calls.values())
    if (c.reason === ModernCallReason.keyReused) ownDoing.set(c.callKey, 'reused a key');
    else if (c.reason === ModernCallReason.cancelledOnServer && cancelledBySharer(recorder, c))
      ownDoing.set(c.callKey, 'another call sharing its key cancelled it');
    // The world's bound, reached by its principal ('bounds are per principal' judges that it was).
    else if (atBound(recorder, c)) ownDoing.set(c.callKey, 'at its bound');
  return realResultAfterFaults(traceOfModern(outcome), {
    lastFaultAt: recorder.faultsEndAt,
    weather: false,
    memo: config.extension ? config.memo : 'none',
    starts: recorder.executions,
    ownDoing,
  });
};

/**
 * The other application call that cancelled `c`'s key on the server, if one did: two calls sharing
 * (principal, key) are one operation on the server (docs/continuity-extension.md §4), so an explicit cancel
 * sent for one of them (§13) ends the other with the key's state, `-32013`. Only a cancel the server
 * answered `cancelled` (the answer may be lost on its way) before `c` ended counts.
 */
function cancelledBySharer(recorder: ModernRecorder, c: CallRecordModern): string | undefined {
  if (c.key === undefined) return undefined;
  return recorder.cancels.find((x) => {
    const other = recorder.calls.get(x.callKey);
    return (
      x.callKey !== c.callKey &&
      other !== undefined &&
      other.key === c.key &&
      other.principal === c.principal &&
      x.stateSent === 'cancelled' &&
      x.arrivedAt !== undefined &&
      x.arrivedAt <= (c.endedAt ?? Number.POSITIVE_INFINITY)
    );
  })?.callKey;
}

function unexplained(
  recorder: ModernRecorder,
  trace: Trace,
  c: CallRecordModern,
  extension: boolean,
  memoWindowMs: number,
): string | undefined {
  const reason = c.reason ?? '';
  const budget = SIM_MODERN_CALL_POLICY.maxReissues;
  if (MAY_HAVE_RUN.has(reason)) {
    if (c.outcome !== 'unknown') return 'a call that may have run reported failed';
    // Through the extension a charge's re-issue is safe by its key; a read-only one's by its annotations.
    if (extension) return 'the server keeps keys: a re-issue was safe';
    // A read-only or idempotent tool: 're-sent when safe' judges it.
    if (safeByAnnotations(c.tool)) return undefined;
    return c.faultedEnds > 0 ? undefined : 'no fault broke any of its attempts';
  }
  switch (reason) {
    case ModernCallReason.throttled:
      if (atBound(recorder, c)) return undefined;
      return c.faultedEnds > budget ? undefined : `only ${c.faultedEnds} faulted attempt(s) of ${c.attempts}`;
    case ModernCallReason.reissueGivenUp:
    case ModernCallReason.unreachable:
    case ModernCallReason.unavailable:
      return c.faultedEnds > budget ? undefined : `only ${c.faultedEnds} faulted attempt(s) of ${c.attempts}`;
    case ModernCallReason.refused:
      return c.faultedEnds > 0 ? undefined : 'never refused';
    case ModernCallReason.memoWindowPassed: {
      const elapsed = (c.endedAt ?? 0) - c.at;
      return elapsed + SIM_MODERN_CALL_POLICY.memoMarginMs >= memoWindowMs
        ? undefined
        : `only ${elapsed} ms into a ${memoWindowMs} ms window`;
    }
    case ModernCallReason.serverOutcomeUnknown:
      // A read-only or idempotent call is sent without a key: a fresh re-send was allowed, always.
      if (safeByAnnotations(c.tool)) return 'the tool is read-only or idempotent: it needed no key';
      // The server could not know only when an instance died (or a memory memo was lost) after the call.
      // Or an earlier attempt may have reached a server whose memo cannot vouch for it (younger than its
      // window): the last attempt got the -32012, so more than one attempt may have run.
      // Only the death of an instance that ran it excuses it: another instance's death is not its cause.
      if (ownerDied(trace, trace.calls.get(c.callKey) as CallTrace) || (c.maybeRanEnds ?? 0) > 1)
        return undefined;
      return 'no instance that ran it died and no earlier attempt may have run';
    case ModernCallReason.keyReused: {
      const shared = [...recorder.calls.values()].some((o) => o.callKey !== c.callKey && o.key === c.key);
      return shared ? undefined : 'its key was never used by another call';
    }
    case ModernCallReason.cancelledOnServer: {
      // Its own abort ends a call as aborted: a call still waiting hears -32013 only through a sharer's cancel.
      const by = cancelledBySharer(recorder, c);
      return by === undefined ? 'no other call sharing its key cancelled it' : undefined;
    }
    case ModernCallReason.eventsEvicted:
      return 'a 410 of the extension is a resume, never an end';
    case ModernCallReason.headerMismatch:
      return headerMismatchUnexplained(recorder, c, extension);
    default:
      return 'no such reason in this world';
  }
}

/**
 * A call that ended on a -32020: its SDK refreshed its view and sent it again once (a new request), so
 * the end is honest only when the declaration changed again after that refresh. Outcome unknown on it
 * only for an unkeyed call (an earlier attempt may have run): for a keyed one (with the extension, every
 * call its annotations do not make safe), a key that ran is answered from
 * the memo, never by the SDK's checks, so a -32020 proves nothing ran under the key.
 */
function headerMismatchUnexplained(
  recorder: ModernRecorder,
  c: CallRecordModern,
  extension: boolean,
): string | undefined {
  if (c.outcome === 'unknown') {
    // With the extension a call is keyed unless its annotations make it safe without a key.
    if (extension && !safeByAnnotations(c.tool))
      return 'a keyed -32020 proves nothing ran under the key: the SDK had to get it';
    return c.faultedEnds > 0 ? undefined : 'no fault broke any of its attempts';
  }
  const refreshed = recorder.refreshedAt.get(c.callKey);
  if (refreshed === undefined) return 'the application never refreshed its view (its SDK never got a -32020)';
  return recorder.schemaChanges.some((x) => x.tool === c.tool && x.at >= refreshed)
    ? undefined
    : 'its declaration did not change after the refresh: the re-sent call carried matching headers';
}

/**
 * Refusals are current: a recorded -32020 reaches an attempt only when its headers disagree with the tool's
 * declaration (a refusal is not an outcome: the memo never replays it to an attempt the SDK would run);
 * a request whose headers were refused is never sent again with them (the SDK rebuilds them); and a call
 * whose attempts were all refused before running never counts as run.
 */
export const refusalsAreCurrentModern: CheckModern = ({ recorder }) => [
  ...recorder.staleRefusals,
  ...recorder.staleResends,
  ...[...recorder.calls.values()]
    .filter((c) => c.outcome === 'error' && c.reason === ModernCallReason.headerMismatch)
    .filter((c) => (recorder.executions.get(c.callKey) ?? 0) > 0)
    .map((c) => `${c.callKey} (${c.tool}) ran, then ended on a header refusal`),
];

/** Once faults stop, every call ends (result, error or outcome unknown) within the settle bound. */
export const noHangModern: CheckModern = onModel(COMMON_CHECKS['no hang']);

/** No progress event, and no call outcome, reaches the application twice. */
export const noDuplicateDeliveryModern: CheckModern = (outcome) => [
  ...[...outcome.recorder.delivered]
    .filter(([, n]) => n > 1)
    .map(([uid, n]) => `${uid} delivered ${n} times`),
  ...COMMON_CHECKS['settled once'](traceOfModern(outcome), RULES_MODERN),
];

/**
 * No unflagged loss: a call that got its result received every progress event of the execution that
 * produced it once, in order, or was told of a gap with the exact count (and never of a loss that did not
 * happen). A call that ended outcome unknown or failed is told its loss is of unknown size.
 */
export const noUnflaggedLossModern: CheckModern = ({ recorder }) => {
  const out: string[] = [];
  for (const c of recorder.calls.values()) {
    if (c.outcome !== 'result') continue;
    const execution = recorder.resultFrom.get(c.callKey);
    if (!execution) continue;
    const order = recorder.deliveryOrder.get(execution) ?? [];
    for (let i = 1; i < order.length; i++)
      if ((order[i] as number) <= (order[i - 1] as number)) {
        out.push(`${c.callKey}: progress out of order (${order.join(',')})`);
        break;
      }
    const emitted = recorder.progress.filter((p) => p.execution === execution);
    const missing = emitted.filter((p) => !recorder.delivered.get(p.uid));
    const flagged = recorder.gaps
      .filter((g) => g.callKey === c.callKey)
      .reduce((sum, g) => sum + (g.lostCount ?? Number.NaN), 0);
    if (flagged !== missing.length)
      out.push(
        `${c.callKey} (${c.tool}): ${missing.length} of ${emitted.length} progress undelivered ` +
          `[${missing.map((p) => p.n).join(',')}] but gaps flagged ${flagged}`,
      );
  }
  return out;
};

/**
 * Aborts end as aborted: a call the application aborted before it ended reaches its library as the abort
 * (the library rejects with the application's own reason), never as a result, an error or outcome unknown
 * decided after the application stopped listening (`callEnding`'s override).
 */
export const abortsEndAsAbortedModern: CheckModern = ({ recorder }) =>
  [...recorder.calls.values()]
    .filter((c) => c.abortedAt !== undefined && c.outcome !== 'aborted')
    .map(
      (c) =>
        `${c.callKey} (${c.tool}) aborted by the application at ${c.abortedAt}, but its library was told ` +
        `${c.outcome ?? 'nothing'}${c.reason ? ` (${c.reason})` : ''}`,
    );

/**
 * How long after a cancel reached one instance a body running on another may still finish: that instance
 * sees the cancelled entry at its next lease tick (the world's lease is `LEASE_MS_MODERN`); two ticks of slack.
 */
const CANCEL_ELSEWHERE_MS = 2 * leaseTickMs(LEASE_MS_MODERN) + 1;

/**
 * Cancels are honoured. A keyed call the application aborts sends its explicit cancel (§13), which never leaves a running key running (the server answers
 * `cancelled`, or the outcome already recorded); once it answered `cancelled`, no body of the call starts
 * again, and none finishes later: at once on the instance the cancel reached, by the next lease tick on
 * another. And an unkeyed run whose connection the client closed (its abort) never finishes: closing the
 * stream cancels it (the spec's server).
 */
export const cancelsAreHonouredModern: CheckModern = ({ recorder }) => {
  const out: string[] = [];
  // A keyed call the application aborted tells the server (its stream closing would not: a transport fact).
  for (const c of recorder.calls.values())
    if (
      c.abortedAt !== undefined &&
      c.key !== undefined &&
      !recorder.cancels.some((x) => x.callKey === c.callKey)
    )
      out.push(
        `${c.callKey} (${c.tool}): keyed, aborted at ${c.abortedAt}, but no cancel was sent for its key`,
      );
  for (const x of recorder.cancels) {
    if (x.keyState === 'running')
      out.push(`${x.callKey}: its cancel (sent at ${x.sentAt}) was answered with the key still running`);
    if (x.keyState !== 'cancelled' || x.arrivedAt === undefined) continue;
    for (const execution of recorder.keyedExecutions.get(x.callKey) ?? []) {
      const start = recorder.starts.get(execution);
      if (!start) continue;
      if (start.at > x.arrivedAt)
        out.push(
          `${x.callKey}: ${execution} started at ${start.at}, after its key was cancelled at ${x.arrivedAt}`,
        );
      const done = recorder.completedAt.get(execution);
      const bound = x.arrivedAt + (start.where === x.servedBy ? 0 : CANCEL_ELSEWHERE_MS);
      if (done !== undefined && done > bound)
        out.push(
          `${x.callKey}: ${execution} on ${start.where} finished at ${done}, after the cancel reached ` +
            `${x.servedBy} at ${x.arrivedAt} and was answered cancelled`,
        );
    }
  }
  for (const [execution, start] of recorder.starts) {
    const closed = start.keyed ? undefined : recorder.closedByClient.get(start.conn);
    const done = recorder.completedAt.get(execution);
    if (closed !== undefined && done !== undefined && done > closed)
      out.push(
        `${start.callKey}: unkeyed ${execution} finished at ${done}, after the client closed its connection at ${closed}`,
      );
  }
  return out;
};

/**
 * A trickle is a stall: bytes that complete nothing prove life only every `STALL_PROGRESS_BYTES`, so an
 * attempt whose message never completes ends within the stall timeout (plus one trickle step), in a world
 * whose client detects stalls. A client that took any byte for life would wait on it forever.
 */
export const trickleIsAStallModern: CheckModern = ({ recorder, config }) => {
  if (!config.heartbeat) return [];
  const bound = STALL_MODERN_MS + 2 * TRICKLE_MS + config.latencyMaxMs;
  return recorder.trickles
    .filter((t) => (t.endedAt ?? t.stoppedAt ?? Number.POSITIVE_INFINITY) - t.at > bound)
    .map(
      (t) =>
        `${t.callKey}: an attempt trickling since ${t.at} was still held at ${t.endedAt ?? t.stoppedAt} ` +
        `(stall timeout ${STALL_MODERN_MS} ms)`,
    );
};

/**
 * Keys stay with their principal: one principal's idempotency key never reaches another's call. A call is
 * refused as reusing a key only when a call of its OWN principal used that key, and a result comes only
 * from an execution of a call of its own principal.
 */
export const keysStayWithTheirPrincipalModern: CheckModern = ({ recorder }) => {
  const out: string[] = [];
  const principalOfExecution = new Map<string, string>();
  for (const [callKey, executions] of recorder.completed)
    for (const x of executions) principalOfExecution.set(x, recorder.calls.get(callKey)?.principal ?? '');
  const calls = [...recorder.calls.values()];
  for (const c of calls) {
    if (c.reason === ModernCallReason.keyReused && c.outcome !== 'aborted') {
      const own = calls.some((o) => o !== c && o.key === c.key && o.principal === c.principal);
      if (!own)
        out.push(
          `${c.callKey} (${c.principal || 'the one principal'}) refused as reusing key ${c.key}, ` +
            `which only another principal used`,
        );
    }
    const from = c.outcome === 'result' ? recorder.resultFrom.get(c.callKey) : undefined;
    const owner = from === undefined ? undefined : principalOfExecution.get(from);
    if (owner !== undefined && owner !== c.principal)
      out.push(`${c.callKey} (${c.principal}) got the result of ${owner}'s execution ${from}`);
  }
  return out;
};

/** The server refused a new key of this call at the per-principal bound. */
const atBound = (recorder: ModernRecorder, c: CallRecordModern): boolean =>
  recorder.boundRefusals.some((r) => r.callKey === c.callKey);

/**
 * Bounds are per principal (or per address, on a server without `authenticate`): the server refuses a new
 * key at a bound only when its holder holds as many keys, so the holder must have sent at least that many
 * other keys by then (counted from the outside, over every key it ever sent by then: a necessary condition,
 * never too strict). And a refusal is honest: nothing ran, so a call refused at every attempt it made and
 * broken by no fault never ends outcome unknown. And no holder is ever admitted past its bound (`overBound`).
 */
export const boundsArePerPrincipalModern: CheckModern = ({ recorder, config }) => {
  const out: string[] = [];
  const calls = [...recorder.calls.values()];
  for (const r of recorder.boundRefusals) {
    const bound = r.bound === 'address' ? config.maxKeysPerAddress : config.maxKeysPerPrincipal;
    const holderOf = (c: CallRecordModern | undefined) => (r.bound === 'address' ? c?.address : c?.principal);
    const holder = holderOf(recorder.calls.get(r.callKey));
    const sent = new Set<string>();
    for (const c of calls)
      if (holderOf(c) === holder && c.at <= r.at)
        for (const k of recorder.keysSent.get(c.callKey) ?? []) sent.add(k);
    // The refused key is among them, and is not yet held.
    if (bound === undefined || sent.size - 1 < bound)
      out.push(
        `${r.callKey} (${r.bound} ${holder || 'the one principal'}) refused at the bound of ${bound} keys ` +
          `at ${r.at}, having sent only ${sent.size} key(s)`,
      );
  }
  for (const c of calls)
    if (
      c.outcome === 'unknown' &&
      c.faultedEnds === 0 &&
      !recorder.executions.get(c.callKey) &&
      recorder.boundRefusals.some((r) => r.callKey === c.callKey)
    )
      out.push(
        `${c.callKey} (${c.tool}) refused at a bound (nothing ran) but ended outcome unknown (${c.reason})`,
      );
  return [...out, ...overBound(recorder, config, 'principal'), ...overBound(recorder, config, 'address')];
};

/**
 * Never past a bound: at no moment does a holder hold more live keys than its bound. Counted from the
 * outside as a lower bound of what it holds: a key whose body started at `s` was admitted by `s`, and its
 * entry cannot leave its window before its call was made plus the window (its window starts when it
 * finishes, after it was admitted, after the call was made). So at each body start, the keys started by
 * then whose call is younger than the window are all held. Held where the bound is kept: the address's in
 * the process that created the key (per process, `AddressKeys`), the principal's in the memo (one shared
 * memo, or each process's own).
 */
function overBound(
  recorder: ModernRecorder,
  config: ModernWorldOutcome['config'],
  bound: 'principal' | 'address',
): string[] {
  const max = bound === 'address' ? config.maxKeysPerAddress : config.maxKeysPerPrincipal;
  if (max === undefined) return [];
  // Per holder and place: each key's evidence of being held (its body's start, its call's time).
  const held = new Map<string, Array<{ key: string; from: number; until: number; callKey: string }>>();
  const seen = new Set<string>();
  const starts = [...recorder.starts.values()].filter((x) => x.keyed).sort((a, b) => a.at - b.at);
  for (const x of starts) {
    const call = recorder.calls.get(x.callKey);
    const key = keyOf(x.conn.exchange.body) ?? call?.key;
    if (!call || key === undefined) continue;
    const holder = bound === 'address' ? call.address : call.principal;
    const place = bound === 'address' || config.memo === 'memory' ? x.where : 'the memo';
    // The address book holds a key in the process that created it: its first body, wherever it runs later.
    if (bound === 'address' && seen.has(`${holder}\u0000${key}`)) continue;
    seen.add(`${holder}\u0000${key}`);
    const group = `${holder}\u0000${place}`;
    const list = held.get(group) ?? [];
    list.push({ key, from: x.at, until: call.at + config.memoWindowMs, callKey: x.callKey });
    held.set(group, list);
  }
  const out: string[] = [];
  for (const [group, list] of held) {
    const [holder, place] = group.split('\u0000');
    for (const now of list) {
      const keys = new Set(list.filter((k) => k.from <= now.from && now.from < k.until).map((k) => k.key));
      if (keys.size > max) {
        out.push(
          `${bound} ${holder || 'the one principal'} held ${keys.size} live keys at ${now.from} (${place}), ` +
            `past its bound of ${max} (the last admitted for ${now.callKey})`,
        );
        break;
      }
    }
  }
  return out;
}

/** The idempotency key a request carried, read off the wire. */
const keyOf = (body: unknown): string | undefined => {
  const meta = (body as { params?: { _meta?: Record<string, unknown> } } | undefined)?.params?._meta;
  const key = meta?.[ContinuityMeta.idempotencyKey];
  return typeof key === 'string' ? key : undefined;
};

export const CHECKS_MODERN = {
  'at most once': atMostOnceModern,
  'honest errors': honestErrorsModern,
  'no spurious outcome unknown': noSpuriousOutcomeUnknownModern,
  'the real result after the faults': realResultAfterFaultsModern,
  'no unflagged loss': noUnflaggedLossModern,
  'no hang': noHangModern,
  'no duplicate delivery': noDuplicateDeliveryModern,
  'refusals are current': refusalsAreCurrentModern,
  're-sent when safe': onModel(COMMON_CHECKS['re-sent when safe']),
  'evictions advance the cursor': onModel(COMMON_CHECKS['evictions advance the cursor']),
  'aborts end as aborted': abortsEndAsAbortedModern,
  'cancels are honoured': cancelsAreHonouredModern,
  'a trickle is a stall': trickleIsAStallModern,
  'keys stay with their principal': keysStayWithTheirPrincipalModern,
  'bounds are per principal': boundsArePerPrincipalModern,
} as const satisfies Record<string, CheckModern>;

export type CheckNameModern = keyof typeof CHECKS_MODERN;
export const CHECK_NAMES_MODERN = Object.keys(CHECKS_MODERN) as CheckNameModern[];
export type ModernVerdict = Partial<Record<CheckNameModern, string[]>>;

export function judgeModernWorld(outcome: ModernWorldOutcome): ModernVerdict {
  const verdict: ModernVerdict = {};
  for (const name of CHECK_NAMES_MODERN) {
    const v = CHECKS_MODERN[name](outcome);
    if (v.length > 0) verdict[name] = v;
  }
  return verdict;
}

export function describeVerdictModern(verdict: ModernVerdict, perCheck = 5): string {
  return (Object.keys(verdict) as CheckNameModern[])
    .map((n) => `${n}:\n  ${(verdict[n] ?? []).slice(0, perCheck).join('\n  ')}`)
    .join('\n');
}
