import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from '@modelcontextprotocol/client';
import type { InspectionEvent, Observer } from 'xstate';
import { ContinuityMeta } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../client/modern/continuity-fetch.js';
import type { ContinuityMetrics } from '../metrics/continuity-metrics.js';
import type { FaultProxy } from '../testing/fault-proxy.js';
import type { DemoLedger } from './demo-server.js';
import type { ModernChargeEvents } from './demo-server-modern.js';
import { CONTINUITY_KEY, OFFICIAL_KEY } from './modern-keys.js';

export { CONTINUITY_KEY, OFFICIAL_KEY };

/**
 * Part 3 of the demo: the same slow charge through the same idle-cutting balancer, on MCP 2026-07-28
 * (no sessions; closing a response stream cancels the request; the client must re-issue with a new id).
 * (a) the official v2 `Client` alone, (b) the same client with `continuityFetch()` against our server's
 * continuity extension. Every line of the timeline is something that was observed, when it was observed.
 */

const MODERN = '2026-07-28';

export interface ModernPartIo {
  readonly proxy: FaultProxy;
  readonly ledger: DemoLedger;
  readonly say: (who: string, what: string) => void;
  readonly log: (line: string) => void;
  readonly chargeMs: number;
  /** Resolves when the server's charge body for this card finished; false after `timeoutMs`. */
  readonly charged: (key: string, timeoutMs: number) => Promise<boolean>;
  /** The inspector of (b)'s call machine (`npm start`'s page shows its attempts). */
  readonly inspect?: Observer<InspectionEvent>;
  /** Records (b)'s re-issues and attempts. */
  readonly metrics?: ContinuityMetrics;
}

export interface ModernPartSummary {
  /** (a) The official v2 client alone. */
  readonly official: {
    readonly charges: number;
    /** What `client.callTool` rejected with (`''`: it did not reject). */
    readonly error: string;
    readonly result: string;
    readonly endedAfterMs: number;
    readonly cuts: number;
  };
  /** (b) The official v2 client with `continuityFetch()`, against the continuity extension. */
  readonly continuity: {
    readonly charges: number;
    readonly result: string;
    readonly error: string;
    readonly endedAfterMs: number;
    readonly cuts: number;
    /** Attempts after the first, each carrying the same idempotency key and a last event id. */
    readonly reissues: number;
    /** Re-issues whose key differed from the first attempt's (must be 0). */
    readonly keyChanges: number;
    /** `onCallEnded`: how the call ended, and its `attempts` (the machine counts re-issues there). */
    readonly outcome: string;
    readonly attempts: number;
  };
}

/** The server side of part 3: timeline lines for each charge body, and a way to await one's end. */
export function modernChargeWatch(say: (who: string, what: string) => void): {
  readonly events: ModernChargeEvents;
  readonly charged: ModernPartIo['charged'];
} {
  const done = new Set<string>();
  const waiters = new Map<string, () => void>();
  return {
    events: {
      onCharging: (key) => say('server', `charging ${key} (the provider takes its time)`),
      onCharged: (key) => {
        say('server', `charge of ${key} done`);
        done.add(key);
        waiters.get(key)?.();
      },
    },
    charged: (key, timeoutMs) =>
      done.has(key)
        ? Promise.resolve(true)
        : new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(false), timeoutMs);
            waiters.set(key, () => {
              clearTimeout(timer);
              resolve(true);
            });
          }),
  };
}

export async function runModernPart(io: ModernPartIo): Promise<ModernPartSummary> {
  const { proxy, say, log } = io;
  let cuts = 0;
  const onFault = (e: { type: string }) => {
    if (e.type === 'cut') cuts++;
  };
  proxy.on('fault', onFault);
  try {
    log(
      `\n-- part 3: MCP ${MODERN} (no sessions; a closed stream cancels): the same ${io.chargeMs} ms charge, the same balancer`,
    );
    log('   (a) the official v2 Client alone');
    const officialCutsBefore = cuts;
    const official = await callOnce(io, OFFICIAL_KEY);
    // The spec: the closed stream cancelled the request, but a payment does not un-happen.
    const finished = await io.charged(OFFICIAL_KEY, io.chargeMs + 5_000);
    const officialCharges = io.ledger.charges.get(OFFICIAL_KEY) ?? 0;
    say(
      'client',
      `the caller got ${official.error ? `"${official.error}"` : 'a result'}; charges made for ${OFFICIAL_KEY}: ${officialCharges}${finished ? '' : ' (the charge had not finished)'}`,
    );
    const officialCuts = cuts - officialCutsBefore;

    log("\n   (b) the official v2 Client with continuityFetch(), our server's continuity extension");
    const continuityCutsBefore = cuts;
    const modern = await callWithContinuity(io);
    // A second execution, had there been one, would be counted the moment it started; its end is awaited
    // so the count below is final.
    await io.charged(CONTINUITY_KEY, 5_000);
    return {
      official: {
        charges: officialCharges,
        error: official.error,
        result: official.result,
        endedAfterMs: official.ms,
        cuts: officialCuts,
      },
      continuity: {
        ...modern,
        charges: io.ledger.charges.get(CONTINUITY_KEY) ?? 0,
        cuts: cuts - continuityCutsBefore,
      },
    };
  } finally {
    proxy.off('fault', onFault);
  }
}

interface CallResult {
  readonly result: string;
  readonly error: string;
  readonly ms: number;
}

/**
 * Connects (the `server/discover` probe) through the balancer. The probe may reuse a pooled connection
 * the balancer is cutting for idleness at that instant (ECONNRESET on write); the demo is about the call,
 * not the probe, so a connect is tried up to three times.
 */
async function connect(io: ModernPartIo, fetchImpl: typeof fetch): Promise<ClientV2> {
  for (let attempt = 1; ; attempt++) {
    const client = new ClientV2(
      { name: 'demo-v2', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } },
    );
    try {
      await client.connect(new TransportV2(io.proxy.url(), { fetch: fetchImpl }));
      return client;
    } catch (error) {
      await client.close().catch(() => undefined);
      if (attempt >= 3) throw error;
    }
  }
}

/** (a): `client.callTool` as the spec has it; the demo only watches what goes out. */
async function callOnce(io: ModernPartIo, key: string): Promise<CallResult> {
  const client = await connect(
    io,
    watchPosts(io.say, () => undefined),
  );
  try {
    return await timedCall(io, client, key);
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** (b): the one line changed: the transport's `fetch` is `continuityFetch()`. */
async function callWithContinuity(
  io: ModernPartIo,
): Promise<Omit<ModernPartSummary['continuity'], 'charges' | 'cuts'>> {
  let firstKey: string | undefined;
  let reissues = 0;
  let keyChanges = 0;
  let outcome = 'none';
  let attempts = 0;
  const watched = watchPosts(io.say, (meta, id) => {
    const key = meta[ContinuityMeta.idempotencyKey];
    if (!(ContinuityMeta.lastEventId in meta)) {
      firstKey = typeof key === 'string' ? key : undefined;
      return `idempotency key ${short(key)}`;
    }
    reissues++;
    if (key !== firstKey) keyChanges++;
    return `re-issue ${reissues}: new id ${id}, same key ${short(key)}${key === firstKey ? '' : ' (CHANGED)'}, last event id ${JSON.stringify(meta[ContinuityMeta.lastEventId])}`;
  });
  const fetchImpl = continuityFetch({
    fetch: watched,
    inspect: io.inspect,
    metrics: io.metrics,
    // As part 1's client: prompt re-issues, with room for a charge that outlives several idle cuts. (The
    // default, 3 re-issues with full-jitter backoff, ends this charge as outcome unknown now and then when
    // the jitter is short: safe, never a second charge, but not the story this part tells.)
    policy: {
      maxReissues: 10,
      backoff: { initialDelayMs: 100, maxDelayMs: 1_000, factor: 2, maxRetries: 10, jitter: 'none' },
    },
    onCallEnded: (ending) => {
      outcome = ending.outcome;
      attempts = ending.attempts;
      io.say(
        'client',
        `continuityFetch onCallEnded: ${ending.outcome}${ending.reason === ending.outcome ? '' : ` (${ending.reason})`} after ${ending.attempts} re-issues`,
      );
    },
  });
  const client = await connect(io, fetchImpl);
  try {
    const call = await timedCall(io, client, CONTINUITY_KEY);
    return {
      result: call.result,
      error: call.error,
      endedAfterMs: call.ms,
      reissues,
      keyChanges,
      outcome,
      attempts,
    };
  } finally {
    await client.close().catch(() => undefined);
  }
}

async function timedCall(io: ModernPartIo, client: ClientV2, key: string): Promise<CallResult> {
  const started = performance.now();
  try {
    const answer = await client.callTool({ name: 'charge', arguments: { key, ms: io.chargeMs } });
    const result = (answer.content as Array<{ text?: string }>)[0]?.text ?? '';
    const ms = performance.now() - started;
    io.say('client', `result: ${result} (after ${Math.round(ms)} ms)`);
    return { result, error: '', ms };
  } catch (e) {
    const ms = performance.now() - started;
    const error = describeError(e);
    io.say('client', `callTool failed after ${Math.round(ms)} ms: ${error}`);
    return { result: '', error, ms };
  }
}

/**
 * A `fetch` that prints each POST's JSON-RPC method (and, for a `tools/call`, what `describe` says of its
 * `_meta`) and passes it on untouched: the demo's window on the wire.
 */
function watchPosts(
  say: ModernPartIo['say'],
  describe: (meta: Record<string, unknown>, id: unknown) => string | undefined,
): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    if (init?.method === 'POST' && typeof init.body === 'string') {
      const body = parse(init.body);
      if (body?.method === 'tools/call') {
        const detail = describe(body.params?._meta ?? {}, body.id);
        say('client', `POST tools/call ${body.params?.name ?? ''}${detail ? `, ${detail}` : ''}`);
      } else if (body?.method) say('client', `POST ${body.method}`);
    }
    return fetch(input, init);
  }) as typeof fetch;
}

interface Posted {
  id?: unknown;
  method?: string;
  params?: { name?: string; _meta?: Record<string, unknown> };
}

function parse(text: string): Posted | undefined {
  try {
    return JSON.parse(text) as Posted;
  } catch {
    return undefined;
  }
}

function short(key: unknown): string {
  return typeof key === 'string' ? `${key.slice(0, 8)}…` : String(key);
}

/** The error as the application sees it: its message, and the cause's when it wraps one. */
function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause instanceof Error ? ` (cause: ${e.cause.message})` : '';
  return `${e.message}${cause}`;
}
