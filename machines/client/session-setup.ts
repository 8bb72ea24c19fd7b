import { type EventObject, enqueueActions, type ParameterizedObject, type SetupReturn, setup } from 'xstate';
import type { JsonRpcMessage } from '../jsonrpc.js';
import type { CursorRecord } from './cursor.js';
import { timerMs } from './limits.js';
import type { ClientContext, ClientEvent, ClientInput, GapReport } from './session-context.js';
import { streamMachine } from './stream.machine.js';

/**
 * The client session machine's base: its types, its stream actors, its delays, and the actions the runtime
 * provides (`machine.provide`): the I/O the machine asks for. Each concern then adds its actions with
 * `setup().extend()` (session-streams.ts, session-calls.ts, session-sending.ts, session-lifecycle.ts), and
 * session.machine.ts draws the chart.
 */
export const sessionBase = setup({
  types: {
    context: {} as ClientContext,
    input: {} as ClientInput,
    events: {} as ClientEvent,
  },
  actors: { stream: streamMachine },
  delays: {
    reinitDelay: ({ context }) => context.reinitDelayMs,
    /** A session that stays active this long has proved itself: re-initializes count from zero again. */
    sessionProven: ({ context }) => timerMs(context.config.policy.maxDelayMs),
  },
  actions: {
    /**
     * The runtime provides the I/O: hand a message to the application (`key`, `eventId`: the stream and SSE
     * event it came on, for the SDK's `onresumptiontoken`)…
     */
    deliver: (_, _params: { message: JsonRpcMessage; key?: string; eventId?: string }) => undefined,
    /**
     * …end a call that authorization could not let through and that never ran: the SDK's
     * `UnauthorizedError` (the runtime rejects the call's `send`; `message` is its JSON-RPC form)…
     */
    rejectUnauthorized: (_, _params: { message: JsonRpcMessage }) => undefined,
    /** …a replayed response to a request this process never sent (after a client restart)… */
    deliverOrphan: (_, _params: { message: JsonRpcMessage }) => undefined,
    notifyGap: (_, _params: GapReport) => undefined,
    /** …write the cursor record (null: forget it)… */
    persistCursor: (_, _params: { record: CursorRecord | null }) => undefined,
    /** …terminate the session on the server (HTTP DELETE)… */
    sendDelete: (_, _params: { sessionId: string }) => undefined,
    /** …report a transport error that belongs to no request (SDK `onerror`)… */
    reportError: (_, _params: { message: string; detail?: unknown }) => undefined,
    /** …report that the transport has failed for good (SDK `onerror`, then `onclose`)… */
    reportFailure: (_, _params: { message: string; detail?: unknown }) => undefined,
    /** …and that the server ended the session (`event: close`): the transport is closed (SDK `onclose`). */
    reportTerminated: (_, _params: undefined) => undefined,
  },
});

type ActionMapOf<S> =
  S extends SetupReturn<
    ClientContext,
    ClientEvent,
    infer _Actors,
    infer _Children,
    infer TActions,
    infer _Guards,
    infer _Delay,
    infer _Tag,
    infer _Input,
    infer _Output,
    infer _Emitted,
    infer _Meta
  >
    ? TActions
    : never;

/** The named actions a layer may enqueue, with their params (as xstate's `setup` types them). */
type NamedActions<M> = {
  [K in keyof M & string]: undefined extends M[K] ? { type: K; params?: M[K] } : { type: K; params: M[K] };
}[keyof M & string];

type StreamActor = { src: 'stream'; logic: typeof streamMachine; id: string | undefined };

/**
 * `enqueueActions` for an action with params, which may enqueue by name (typed, params checked) the actions
 * of the layers below it (`S`, a `setup()` or `.extend()` result). The setup's own `enqueueActions` takes
 * no params, and the free one does not know the names.
 */
export const enqueueIn =
  <S>() =>
  <P extends ParameterizedObject['params'] | undefined = undefined>(
    collect: Parameters<
      typeof enqueueActions<
        ClientContext,
        ClientEvent,
        P,
        ClientEvent,
        StreamActor,
        NamedActions<ActionMapOf<S>>,
        never,
        never,
        EventObject
      >
    >[0],
  ) =>
    enqueueActions<
      ClientContext,
      ClientEvent,
      P,
      ClientEvent,
      StreamActor,
      NamedActions<ActionMapOf<S>>,
      never,
      never,
      EventObject
    >(collect);
