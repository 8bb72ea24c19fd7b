import { createActor, fromCallback, SimulatedClock } from 'xstate';
import type { CursorRecord } from '../../machines/client/cursor.js';
import type { Exchange, IoEvent } from '../../machines/client/io.js';
import {
  type ClientInput,
  clientSessionMachine,
  type GapReport,
} from '../../machines/client/session.machine.js';
import { streamMachine } from '../../machines/client/stream.machine.js';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import type { ServerAdvertisement } from '../../machines/validity.js';

/**
 * The client machine with a hand-driven network: each HTTP exchange the machine asks for is recorded,
 * and the test answers it event by event. Time is a SimulatedClock.
 */
export interface ScriptedExchange {
  readonly request: Exchange;
  readonly reply: (...events: IoEvent[]) => void;
  aborted: boolean;
}

export function scriptedClient(input: ClientInput = {}) {
  const exchanges: ScriptedExchange[] = [];
  const delivered: JsonRpcMessage[] = [];
  const orphans: JsonRpcMessage[] = [];
  const gaps: GapReport[] = [];
  const persisted: Array<CursorRecord | null> = [];
  const deletes: string[] = [];
  const errors: string[] = [];
  const failures: string[] = [];
  const exchange = fromCallback<IoEvent, Exchange>(({ input: request, sendBack }) => {
    const record: ScriptedExchange = {
      request,
      reply: (...events) => {
        for (const e of events) sendBack(e);
      },
      aborted: false,
    };
    exchanges.push(record);
    return () => {
      record.aborted = true;
    };
  });
  const machine = clientSessionMachine.provide({
    actors: { stream: streamMachine.provide({ actors: { exchange } }) },
    actions: {
      deliver: (_, { message }) => delivered.push(message),
      deliverOrphan: (_, { message }) => orphans.push(message),
      notifyGap: (_, gap) => gaps.push(gap),
      persistCursor: (_, { record }) => persisted.push(record),
      sendDelete: (_, { sessionId }) => deletes.push(sessionId),
      reportError: (_, { message }) => errors.push(message),
      reportFailure: (_, { message }) => failures.push(message),
    },
  });
  const clock = new SimulatedClock();
  const actor = createActor(machine, {
    clock,
    input: {
      policy: { initialDelayMs: 100, maxDelayMs: 1_000, factor: 2, maxRetries: 3, jitter: 'none' },
      ...input,
    },
  }).start();
  const send = (message: JsonRpcMessage) => actor.send({ type: 'app.send', message });
  const last = () => exchanges[exchanges.length - 1] as ScriptedExchange;
  const open = () => exchanges.filter((e) => !e.aborted);
  return {
    actor,
    clock,
    exchanges,
    delivered,
    orphans,
    gaps,
    persisted,
    deletes,
    errors,
    failures,
    send,
    last,
    open,
  };
}

export const ADVERTISED: ServerAdvertisement = {
  retentionMs: 600_000,
  maxEventsPerStream: 1_000,
  idleTtlMs: 1_800_000,
  gapSignalling: true,
  duplicateRequestProtection: false,
};

export const initialize = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25' },
} as const;
export const initResult = (id: number | string = 0): JsonRpcMessage => ({
  jsonrpc: '2.0',
  id,
  result: { protocolVersion: '2025-11-25', capabilities: {}, serverInfo: { name: 's', version: '1' } },
});

/** Drives a client to `active` on session `S1`, with the standalone GET stream open. */
export function activeClient(input: ClientInput = {}, advertisement = ADVERTISED) {
  const c = scriptedClient(input);
  c.send(initialize);
  c.last().reply(
    { type: 'http.stream', sessionId: 'S1', advertisement },
    { type: 'sse.event', id: 'e-1-0' },
    { type: 'sse.event', id: 'e-1-1', message: initResult() },
    { type: 'net.ended' },
  );
  c.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  c.exchanges
    .find((e) => (e.request.body as { method?: string })?.method === 'notifications/initialized')
    ?.reply({ type: 'http.response', status: 202 });
  const standalone = c.exchanges.find((e) => e.request.method === 'GET');
  standalone?.reply({ type: 'http.stream', sessionId: 'S1' }, { type: 'sse.event', id: 'e-0-0' });
  return c;
}

export const toolCall = (id: number, name: string) =>
  ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } }) as const;
