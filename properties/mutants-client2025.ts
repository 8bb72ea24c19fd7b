import {
  cursorFileSizeRefusal,
  MAX_CURSOR_FILE_BYTES,
  recordOfCursorFile,
} from '../machines/client/cursor.js';
import { EXCHANGE_RULES, exchangeStep } from '../machines/client/exchange-core.js';
import type { Mutant } from './mutants.js';
import { CORRECT_CLIENT } from './world/client.js';
import { CURSOR_FILE_RULES } from './world/cursor-file.js';

/**
 * Deliberately wrong variants of the decisions the 2025 exchange core (machines/client/exchange-core.ts)
 * took over from `src/client/exchange.ts`: each swaps one of its rules (`ExchangeRules`) or wraps its step,
 * in the world's client, which runs the same core as the runtime (properties/world/client.ts). Judged by
 * the 2025 properties like every mutant (mutants-client2025.test.ts).
 *
 * The world exposes each rule: large results trickle in and a proxy can trickle bytes into a silent stream
 * (the progress threshold, both ways), the server sends keep-alive comments (a comment as proof of life),
 * a server may leave a finished response open (the drain deadline), and the application closes its
 * client (`deletesOnClose`, machines/client/closing.ts), and a durable restart reads the cursor file back
 * through the runtime's checks (machines/client/cursor.ts, properties/world/cursor-file.ts). Not yet
 * exposed: a named refusal, the close deadline, `settledByMessage`, `resumesFrom` and `tokenMove` (the world
 * never cancels nor resumes by token).
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
  {
    name: 'bytes that complete no event never prove life (no progress threshold), so a large result is cut as stalled',
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'no-progress-threshold',
        exchangeRules: { ...EXCHANGE_RULES, progressBytes: Number.POSITIVE_INFINITY },
      },
    },
    caughtBy: ['no spurious outcome unknown', 'no hang'],
  },
  {
    name: 'every byte proves life (a 1-byte threshold), so a proxy trickling bytes hides a stalled stream',
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'byte-is-progress',
        exchangeRules: { ...EXCHANGE_RULES, progressBytes: 1 },
      },
    },
    caughtBy: ['no hang', 'no unflagged loss'],
  },
  {
    name: 'a keep-alive comment is not proof of life, so a quiet live stream is cut every stall timeout',
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'comment-not-alive',
        exchangeStep: (state, fact, rules) =>
          exchangeStep(state, fact.kind === 'chunk' ? { ...fact, comment: false } : fact, rules),
      },
    },
    caughtBy: ['quiet once settled'],
  },
  {
    name: "a stopped POST's body is drained for an hour, so a server that leaves it open holds the connection",
    branch: 'exchange core',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'drain-forever',
        exchangeRules: { ...EXCHANGE_RULES, drainMs: 3_600_000 },
      },
    },
    caughtBy: ['stopped connections let go'],
  },
  {
    name: 'closing never sends DELETE (deleteOnClose read as off), so a closed session stays on the server',
    branch: 'closing',
    variant: { client: { ...CORRECT_CLIENT, name: 'no-delete-on-close', deletesOnClose: () => false } },
    caughtBy: ['close ends the session'],
  },
  {
    name: "the cursor file's size bound compared the wrong way round, so every record a process saved is refused",
    branch: 'cursor file',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'cursor-file-size-inverted',
        cursorFile: {
          ...CURSOR_FILE_RULES,
          sizeRefusal: (size) =>
            cursorFileSizeRefusal(size) === undefined
              ? `${size} bytes, at most ${MAX_CURSOR_FILE_BYTES}`
              : undefined,
        },
      },
    },
    caughtBy: ['no unflagged loss'],
  },
  {
    name: 'a cursor file of ours read as holding no record, so a restarted process forgets its session and streams',
    branch: 'cursor file',
    variant: {
      client: {
        ...CORRECT_CLIENT,
        name: 'cursor-file-read-empty',
        cursorFile: {
          ...CURSOR_FILE_RULES,
          recordOf: (parsed) => {
            const file = recordOfCursorFile(parsed);
            return 'refusal' in file ? file : { record: null };
          },
        },
      },
    },
    caughtBy: ['no unflagged loss'],
  },
];
