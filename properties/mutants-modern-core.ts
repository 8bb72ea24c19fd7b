import { callEnding } from '../machines/client/call-core.js';
import { libraryEnding } from '../machines/client/modern-call-wire.js';
import type { ModernMutant } from './mutants-modern.js';
import { RUNTIME_DECISIONS } from './world-modern/server.js';

/**
 * Deliberately wrong variants of the decisions the client core (machines/client/call-core.ts) took over
 * from the hosts, and of the server's unkeyed path: each swaps one rule of the core (`ModernClientVariant`
 * `rules`, which the world's client passes to the same functions the runtime calls) or the server's
 * `streamsUnkeyedCall`. Judged by the 2026 properties like every mutant (mutants-modern.test.ts).
 */
export const CLIENT_CORE_MUTANTS_MODERN: readonly ModernMutant[] = [
  {
    name: 'read-only and idempotent calls are keyed too (keysCall ignores the annotations)',
    branch: 'client core',
    variant: { client: { name: 'keys-everything', rules: { keysCall: (_tool, extension) => !!extension } } },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: 'no call is keyed (keysCall ignores the extension)',
    branch: 'client core',
    variant: { client: { name: 'keys-nothing', rules: { keysCall: () => false } } },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: 'a reset before any response byte is named refused (nothing ran)',
    branch: 'client core',
    variant: {
      client: {
        name: 'reset-as-refused',
        rules: {
          failureEnd: (_fault, responded) => (responded ? { kind: 'cut-mid-stream' } : { kind: 'refused' }),
        },
      },
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'an outcome unknown reaches the library as the last HTTP answer (libraryEnding ignores the outcome)',
    branch: 'client core',
    variant: {
      client: {
        name: 'raw-unknown',
        rules: {
          libraryEnding: (outcome, end, open) =>
            outcome === 'outcome-unknown' && !open ? 'raw-answer' : libraryEnding(outcome, end, open),
        },
      },
    },
    caughtBy: ['honest errors'],
  },
  {
    // The bug fixed in 7c48461: an unkeyed call answered in the application's mode, no keep-alives.
    name: 'unkeyed calls are not streamed (no keep-alives: streamsUnkeyedCall always false)',
    branch: 'unkeyed request',
    variant: {
      client: { name: 'mcp-continuity' },
      server: { ...RUNTIME_DECISIONS, streamsUnkeyedCall: () => false },
    },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    // The progress rule read as "any byte is a sign of life": a trickle holds the call for ever.
    name: 'any byte proves life (the progress rule restarts the stall timer on every chunk)',
    branch: 'client core',
    variant: { client: { name: 'any-byte-alive', rules: { progressBytes: 1 } } },
    caughtBy: ['a trickle is a stall'],
  },
  {
    // Only complete units prove life: a large answer on a slow link is stalled, re-issued, stalled again.
    name: 'bytes never prove life (the progress rule is not applied)',
    branch: 'client core',
    variant: {
      client: { name: 'no-progress-rule', rules: { progressBytes: Number.POSITIVE_INFINITY } },
    },
    caughtBy: ['no spurious outcome unknown'],
  },
  {
    name: "an aborted call reaches the library as the machine's ending (callEnding ignores the abort)",
    branch: 'client core',
    variant: {
      client: {
        name: 'abort-not-final',
        ending: (out, facts, rules) => callEnding(out, { ...facts, aborted: false }, rules),
      },
    },
    caughtBy: ['aborts end as aborted'],
  },
  {
    // A memo store that files entries by the idempotency key alone (a table without the principal column).
    name: "the memo files keys without their principal (one principal's key answers another's call)",
    branch: 'stored entry',
    variant: {
      client: { name: 'mcp-continuity' },
      server: { ...RUNTIME_DECISIONS, memoSlot: withoutPrincipal },
    },
    caughtBy: ['keys stay with their principal'],
  },
  {
    // A memo store that counts every principal's entries against each one's bound.
    name: "the per-principal bound counts every principal's keys (one principal's keys refuse another's)",
    branch: 'stored entry',
    variant: {
      client: { name: 'mcp-continuity' },
      server: { ...RUNTIME_DECISIONS, memoPrincipal: () => '' },
    },
    caughtBy: ['bounds are per principal'],
  },
];

/** A memo key (`memoKey`: `<length>:<principal>|<key>`) without its principal. */
function withoutPrincipal(memoKey: string): string {
  const colon = memoKey.indexOf(':');
  return memoKey.slice(colon + 1 + Number(memoKey.slice(0, colon)) + 1);
}
