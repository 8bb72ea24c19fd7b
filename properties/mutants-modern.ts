import type { ModernCallEvent } from '../machines/client/modern-call.machine.js';
import {
  MODERN_CALL_DECISION_TABLE,
  type ModernCallCase,
  ModernCallReason,
  type ModernCallRow,
} from '../machines/client/modern-call-decide.js';
import { JsonRpcCode } from '../machines/codes.js';
import { ContinuityErrorCode } from '../machines/continuity-extension.js';
import { AddressKeys } from '../machines/server/keyed-address-book.js';
import { keyedBodyEndSteps, keyedFollowSteps } from '../machines/server/keyed-execute.js';
import { memoExpired } from '../machines/server/keyed-memo.js';
import { keyedRequestMachine } from '../machines/server/keyed-request.machine.js';
import type { CheckNameModern } from './checks-modern.js';
import { CLIENT_CORE_MUTANTS_MODERN } from './mutants-modern-core.js';
import { CORRECT_CLIENT_MODERN } from './world-modern/client.js';
import { RUNTIME_DECISIONS } from './world-modern/server.js';
import { SimMemoStore } from './world-modern/sim-memo.js';
import type { ModernWorldVariant } from './world-modern/world.js';

/**
 * Deliberately wrong variants of the 2026-07-28 decisions, at least one per decision the coverage table
 * lists: rows of the client's table, the call machine's inputs and exchange reports, what the keyed
 * call's steps are told and how they end, the memo window, and the keyed machine's guards. Each swaps one decision of the REAL code: through the
 * seams the runtime itself uses (`provide`, the plan functions the executor calls), or, where the real
 * code reaches a decision without a seam, by swapping it in place for the duration of one world (a row
 * of `MODERN_CALL_DECISION_TABLE`, a guard of `keyedRequestMachine`, which `stepMemoEntry` runs). The
 * property suite must catch every one.
 */
export interface ModernMutant {
  readonly name: string;
  /** The decision it breaks (a group of the coverage table). */
  readonly branch: string;
  readonly variant: ModernWorldVariant;
  /** The properties expected to catch it (documentation: the test prints which one did). */
  readonly caughtBy: readonly CheckNameModern[];
}

/** Swaps rows of the real table for the duration of one world. */
function tableRows(rows: Partial<Record<ModernCallCase, ModernCallRow>>): () => () => void {
  return () => {
    const table = MODERN_CALL_DECISION_TABLE as Record<ModernCallCase, ModernCallRow>;
    const saved = { ...table };
    Object.assign(table, rows);
    return () => Object.assign(table, saved);
  };
}

/** Swaps one guard of the real keyed-request machine for the duration of one world. */
function keyedGuard(name: string, guard: () => boolean): () => () => void {
  return () => {
    const guards = keyedRequestMachine.implementations.guards as Record<string, unknown>;
    const saved = guards[name];
    guards[name] = guard;
    return () => {
      guards[name] = saved;
    };
  };
}

const client = CORRECT_CLIENT_MODERN;
const REISSUE = { action: 'backoff-reissue', reason: 'cut_mid_stream' } as const;

/**
 * Wraps the keyed core's real address book (`AddressKeys.reserve`, which runs `admitAddressKey`) for one
 * world: the bound it is given, and the address it files a key under.
 */
function addressBook(bound: (max: number) => number, file: (address: string) => string): () => () => void {
  return () => {
    const proto = AddressKeys.prototype as unknown as Record<string, unknown>;
    const saved = {
      reserve: proto.reserve,
      created: proto.created,
      release: proto.release,
      finished: proto.finished,
    };
    const reserve = saved.reserve as (this: unknown, a: string, k: string, now: number) => unknown;
    proto.reserve = function (this: { maxPerAddress: number }, address: string, key: string, now: number) {
      const max = this.maxPerAddress;
      this.maxPerAddress = bound(max);
      try {
        return reserve.call(this, file(address), key, now);
      } finally {
        this.maxPerAddress = max;
      }
    };
    for (const name of ['created', 'release', 'finished'] as const) {
      const real = saved[name] as (this: unknown, a: string, ...rest: unknown[]) => void;
      proto[name] = function (this: unknown, address: string, ...rest: unknown[]) {
        real.call(this, file(address), ...rest);
      };
    }
    return () => Object.assign(proto, saved);
  };
}

/** The simulated memo's create, given one entry more than the per-principal bound, for one world. */
function memoBoundPlusOne(): () => void {
  const proto = SimMemoStore.prototype;
  const create = proto.create;
  proto.create = function (this: SimMemoStore, entry, max) {
    return create.call(this, entry, max + 1);
  };
  return () => {
    proto.create = create;
  };
}

/** Swaps one action of the real keyed-request machine for `action`, for one world. */
function keyedActionAs(name: string, action: () => void): () => () => void {
  return () => {
    const actions = keyedRequestMachine.implementations.actions as Record<string, unknown>;
    const saved = actions[name];
    actions[name] = action;
    return () => {
      actions[name] = saved;
    };
  };
}

/** Swaps one action of the real keyed-request machine for another of its actions, for one world. */
function keyedAction(name: string, as: string): () => () => void {
  return () => {
    const actions = keyedRequestMachine.implementations.actions as Record<string, unknown>;
    const saved = actions[name];
    actions[name] = actions[as];
    return () => {
      actions[name] = saved;
    };
  };
}

export const MUTANTS_MODERN: readonly ModernMutant[] = [
  {
    name: 'the per-address bound is off by one (an address is refused at one key fewer)',
    branch: 'bound',
    variant: {
      client,
      patch: addressBook(
        (max) => max - 1,
        (address) => address,
      ),
    },
    caughtBy: ['bounds are per principal'],
  },
  {
    name: 'the per-address bound admits past it (an address holds one key more than its bound)',
    branch: 'bound',
    variant: {
      client,
      patch: addressBook(
        (max) => max + 1,
        (address) => address,
      ),
    },
    caughtBy: ['bounds are per principal'],
  },
  {
    // A memo store whose create counts one entry short (`>` where the bound wants `>=`).
    name: 'the per-principal bound admits past it (the memo creates one key more than its bound)',
    branch: 'bound',
    variant: { client, patch: memoBoundPlusOne },
    caughtBy: ['bounds are per principal'],
  },
  {
    // As if every caller came from one address (a proxy's address taken for the client's).
    name: 'the per-address bound counts every address’s keys as one address’s',
    branch: 'bound',
    variant: {
      client,
      patch: addressBook(
        (max) => max,
        () => 'one',
      ),
    },
    caughtBy: ['bounds are per principal'],
  },
  {
    // The keyed machine's cancel transition emits no abort: `planKeyedCancel` sees nothing to cancel.
    name: 'the cancel of a running key is ignored (the keyed machine’s abortBody emits nothing)',
    branch: 'cancel',
    variant: { client, patch: keyedActionAs('abortBody', () => undefined) },
    caughtBy: ['cancels are honoured'],
  },
  {
    name: 'a cancelled key’s body runs on (abortsLocalRun always false: neither the cancel nor the lease tick aborts it)',
    branch: 'cancel',
    variant: { client, server: { ...RUNTIME_DECISIONS, core: { abortsLocalRun: () => false } } },
    caughtBy: ['cancels are honoured'],
  },
  {
    name: 'the application’s cancel ends a keyed call as a failure (no explicit cancel is sent)',
    branch: 'cancel',
    variant: {
      client,
      patch: tableRows({
        'cancelled-by-application': { action: 'fail', reason: ModernCallReason.cancelledByApplication },
      }),
    },
    caughtBy: ['cancels are honoured'],
  },
  {
    // The old behaviour: the SDK's -32020 memoized for the whole window as if the tool had answered.
    name: 'a refusal before the run is recorded as the tool’s outcome (keyedBodyEndSteps told refused=false)',
    branch: 'stored entry',
    variant: {
      client,
      server: { ...RUNTIME_DECISIONS, bodyEnd: (entry, final) => keyedBodyEndSteps(entry, final, false) },
    },
    caughtBy: ['refusals are current'],
  },
  {
    name: 'a re-issue of a key whose tool ran starts over (answerRecorded provided as startOver)',
    branch: 'keyed plan',
    variant: { client, patch: keyedAction('answerRecorded', 'startOver') },
    caughtBy: ['at most once'],
  },
  {
    // The old client row: re-send on -32020, with the same stale headers.
    name: 'the table re-issues a -32020 with the same headers',
    branch: 'table row',
    variant: {
      client,
      patch: tableRows({ '400-header-mismatch': { action: 'backoff-reissue', reason: 'header_mismatch' } }),
    },
    caughtBy: ['refusals are current'],
  },
  {
    // What the spec asks of a client without the extension: re-issue whatever broke.
    name: 'the table re-issues every cut, stall and silent end, safe or not',
    branch: 'table row',
    variant: {
      client,
      patch: tableRows({
        'cut-before-response': REISSUE,
        'cut-mid-stream': REISSUE,
        'ended-without-answer': REISSUE,
        stalled: REISSUE,
      }),
    },
    caughtBy: ['at most once'],
  },
  {
    // A 503 is "not processed" by RFC 9110, but a proxy answers it after its upstream reset too.
    name: 'a 503 without Retry-After read as a server shedding load (nothing ran)',
    branch: 'table row',
    variant: { client, patch: tableRows({ '503-no-retry-after': MODERN_CALL_DECISION_TABLE['503'] }) },
    caughtBy: ['at most once'],
  },
  {
    name: 'a cut mid-stream read as a refused connection (nothing ran)',
    branch: 'table row',
    variant: { client, patch: tableRows({ 'cut-mid-stream': MODERN_CALL_DECISION_TABLE.refused }) },
    caughtBy: ['at most once', 'honest errors'],
  },
  {
    name: 'the extension 410 read as a cut (re-issued from the same cursor, no gap)',
    branch: 'table row',
    variant: {
      client,
      patch: tableRows({ 'ext-events-evicted': { action: 'reissue-if-safe', reason: 'events_evicted' } }),
    },
    caughtBy: ['no spurious outcome unknown', 'no unflagged loss'],
  },
  {
    name: 'the client ignores the advertised memo window',
    branch: 'decision',
    variant: {
      client: {
        name: 'no-window',
        input: (i) => (i.extension ? { ...i, extension: { memoWindowMs: Number.MAX_SAFE_INTEGER } } : i),
      },
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'outcome unknown reported to the application as a definite failure',
    branch: 'decision',
    variant: {
      client: {
        name: 'unknown-as-failed',
        distort: (m) =>
          'error' in m && m.error.code === JsonRpcCode.OUTCOME_UNKNOWN
            ? { ...m, error: { code: JsonRpcCode.REQUEST_FAILED, message: 'failed', data: m.error.data } }
            : m,
      },
    },
    caughtBy: ['honest errors'],
  },
  {
    name: 'the SSE ids of a keyed stream are not kept (no cursor, no replay de-duplication)',
    branch: 'decision',
    variant: {
      client: {
        name: 'no-event-ids',
        report: (e) => (e.type === 'attempt.message' ? { ...e, eventId: undefined } : e),
      },
    },
    caughtBy: ['no duplicate delivery'],
  },
  {
    name: 'a re-issue the memory memo lost with a restart runs again (memo taken as complete)',
    branch: 'keyed plan',
    variant: {
      client,
      server: {
        ...RUNTIME_DECISIONS,
        answer: (c, a) => (c.kind === 'memo-complete-for' ? Number.POSITIVE_INFINITY : a),
      },
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'the memo forgets a running key',
    branch: 'stored entry',
    variant: {
      client,
      server: {
        ...RUNTIME_DECISIONS,
        memoExpired: (e, w, now) =>
          e.state === 'running'
            ? now - (e as unknown as { createdAt: number }).createdAt > 250
            : memoExpired(e, w, now),
      },
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'a closed stream cancels keyed work',
    branch: 'attached response',
    variant: { client, server: { ...RUNTIME_DECISIONS, onKeyedStreamClosed: 'cancel' } },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: 'a re-issue is answered without the fingerprint check',
    branch: 'keyed plan',
    variant: { client, patch: keyedGuard('isOtherRequest', () => false) },
    caughtBy: ['honest errors'],
  },
  {
    name: 'a re-issue attaches past an evicted cursor',
    branch: 'keyed plan',
    variant: { client, patch: keyedGuard('cannotResume', () => false) },
    caughtBy: ['no unflagged loss'],
  },
  {
    name: 'a 410 counts one event too many',
    branch: 'keyed plan',
    variant: {
      client,
      server: {
        ...RUNTIME_DECISIONS,
        end: (end) => {
          if (end.kind !== 'reply' || end.reply.error.code !== ContinuityErrorCode.EVENTS_EVICTED) return end;
          const data = end.reply.error.data as { lostCount: number };
          return {
            ...end,
            reply: {
              ...end.reply,
              error: { ...end.reply.error, data: { ...data, lostCount: data.lostCount + 1 } },
            },
          };
        },
      },
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    // The one liveness rule of the core (the call's plan, attached responses, the lease tick's orphans).
    name: "a dead owner's running key is taken as alive (never declared outcome unknown)",
    branch: 'keyed plan',
    variant: { client, server: { ...RUNTIME_DECISIONS, core: { isOwnerAlive: () => true } } },
    caughtBy: ['no hang', 'no spurious outcome unknown'],
  },
  {
    // The start's and the lease tick's orphan check ignores liveness: a restart declares a LIVE
    // instance's running keys dead (and that instance's lease tick then aborts their bodies).
    name: 'a restart declares every running key outcome unknown, a live instance’s too',
    branch: 'keyed core',
    variant: {
      client,
      server: {
        ...RUNTIME_DECISIONS,
        core: { orphanedEntries: (entries) => entries.filter((e) => e.state === 'running') },
      },
    },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: 'the lease tick aborts bodies still running here',
    branch: 'keyed core',
    variant: { client, server: { ...RUNTIME_DECISIONS, core: { abortsLocalRun: () => true } } },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: 'an attached response stops at its first wait (ends without its answer)',
    branch: 'keyed core',
    variant: {
      client,
      server: {
        ...RUNTIME_DECISIONS,
        core: {
          followSteps: function* (facts) {
            const steps = keyedFollowSteps(facts);
            let r = steps.next();
            while (!r.done) {
              if (r.value.kind === 'wait') return { end: 'lost' as const };
              r = steps.next(yield r.value);
            }
            return r.value;
          },
        },
      },
    },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    // The mirror of the mutant above. It is caught without any death (a re-issue finds its own running key
    // declared dead), so the tightened death excuse is shown by properties/checks/common.test.ts instead.
    name: "a live owner's running key is taken as dead (declared outcome unknown)",
    branch: 'keyed plan',
    variant: {
      client,
      server: { ...RUNTIME_DECISIONS, core: { isOwnerAlive: (owner, self) => owner === self } },
    },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    // Issue 24 item 5: repeated 410s must not excuse a re-issue that never advanced its cursor.
    name: 'a 410 re-issue carries its stale cursor (the resumeAfter of the 410 is not read)',
    branch: 'decision',
    variant: { client: { ...client, report: withoutResumeAfter } },
    caughtBy: ['evictions advance the cursor'],
  },
  // The client core's decisions and the server's unkeyed path (mutants-modern-core.ts).
  ...CLIENT_CORE_MUTANTS_MODERN,
];

/** The exchange reports a 410 without the `resumeAfter` its body carried: the client keeps its old cursor. */
function withoutResumeAfter(event: ModernCallEvent): ModernCallEvent {
  if (event.type !== 'attempt.ended' || event.end.kind !== 'http-status' || event.end.status !== 410)
    return event;
  const body = event.end.body as { error?: { data?: Record<string, unknown> } } | undefined;
  if (!body?.error?.data) return event;
  const { resumeAfter: _dropped, ...data } = body.error.data;
  return { ...event, end: { ...event.end, body: { ...body, error: { ...body.error, data } } } };
}
