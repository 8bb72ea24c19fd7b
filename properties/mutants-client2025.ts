import { EXCHANGE_RULES, exchangeStep } from '../machines/client/exchange-core.js';
import type { Mutant } from './mutants.js';
import { CORRECT_CLIENT } from './world/client.js';

/**
 * Deliberately wrong variants of the decisions the 2025 exchange core (machines/client/exchange-core.ts)
 * took over from `src/client/exchange.ts`: each swaps one of its rules (`ExchangeRules`) or wraps its step,
 * in the world's client, which runs the same core as the runtime (properties/world/client.ts). Judged by
 * the 2025 properties like every mutant (mutants-client2025.test.ts).
 *
 * Rules of the core the 2025 world cannot tell apart yet (tried, not caught in 400–600 worlds): the
 * progress threshold and the drain deadline (the world sends whole units and judges outcomes, not
 * connections), and a comment as proof of life and refused named reset (a stall cut or a refusal during
 * faults is resumed or excused).
 */
export const CLIENT_2025_MUTANTS: readonly Mutant[] = [
  {
    name: 'a reset is named refused (the request "never left"), so a POST that may have run is sent again',
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'reset-as-refused-2025',
        exchangeRules: {
          ...EXCHANGE_RULES,
          faultOf: (failure) =>
            failure.kind === 'network' && failure.fault === 'reset'
              ? 'refused'
              : EXCHANGE_RULES.faultOf(failure),
        },
      },
    },
    caughtBy: ['at most once'],
  },
  {
    name: 'a chunk that completes several events hands over only its first',
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'first-event-of-chunk',
        exchangeStep: (state, fact, rules) => {
          const step = exchangeStep(state, fact, rules);
          return {
            ...step,
            events: step.events.map((e) =>
              e.type === 'sse.events' ? { ...e, events: e.events.slice(0, 1) } : e,
            ),
          };
        },
      },
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    // Caught since a failed connect excuses later calls only when it failed during the faults.
    name: 'an event stream read as one body (the client never connects)',
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'stream-as-body',
        exchangeRules: { ...EXCHANGE_RULES, readsAsStream: () => false },
      },
    },
    caughtBy: ['no spurious outcome unknown'],
  },
];
