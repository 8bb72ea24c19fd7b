import { isRequest, type JsonRpcMessage } from '../jsonrpc.js';
import type { PostFacts } from './post-failure.js';
import { type ClientContext, cursorRecordOf, type StreamEntry, stallTimeoutFor } from './session-context.js';
import { enqueueIn, sessionBase } from './session-setup.js';
import type { StreamInput, StreamKind } from './stream.machine.js';

/** Takes a running stream out (a cancelled call's): stopped, not pooled, since it has not ended. */
export function dropStream(context: ClientContext, key: string): StreamEntry | undefined {
  const entry = context.streams[key];
  delete context.streams[key];
  delete context.cursors[key];
  return entry;
}

/**
 * Forgets an ended stream: its entry and cursor go (in place, see `ClientContext`), and its actor, which
 * has ended and does nothing more, waits in the pool to carry a later stream.
 */
export function forgetStream(context: ClientContext, key: string): StreamEntry | undefined {
  const entry = context.streams[key];
  delete context.streams[key];
  delete context.cursors[key];
  if (entry) context.pool.push(entry.ref);
  return entry;
}

export type SpawnArgs = { key: string; kind: StreamKind; body?: JsonRpcMessage; lastEventId?: string };

const act = enqueueIn<typeof sessionBase>();

/**
 * The session's streams: starting one (on a pooled actor when one has ended), stopping them all, and
 * recording and persisting their cursors.
 */
export const sessionStreams = sessionBase.extend({
  actions: {
    /** Starts a stream: on an ended actor from the pool, else on a new one. */
    spawnStream: act(({ context, enqueue }, args: SpawnArgs) => {
      const body = args.body;
      const request = args.kind === 'request' && body !== undefined && isRequest(body) ? body : undefined;
      const post: PostFacts = {
        initialize: request?.method === 'initialize',
        serverDeduplicates: context.advertisement?.duplicateRequestProtection === true,
        readOnly: request !== undefined && context.config.retryPolicy(request, context.annotations),
      };
      const input: StreamInput = {
        key: args.key,
        streamId: `${args.key}#${context.spawned}`,
        kind: args.kind,
        sessionId: context.sessionId,
        protocolVersion: context.protocolVersion,
        body,
        lastEventId: args.lastEventId,
        policy: context.config.policy,
        stallTimeoutMs: stallTimeoutFor(context.config, context.advertisement),
        jitterSeed: (context.config.seed + context.spawned * 7919) >>> 0,
        post,
        authorize: context.config.authorization === true,
      };
      if (args.kind !== 'message')
        context.cursors[args.key] = { kind: args.kind, lastEventId: args.lastEventId };
      const pooled = context.pool.pop();
      if (pooled) {
        enqueue.sendTo(pooled, { type: 'stream.reuse', input });
        context.streams[args.key] = { ref: pooled, streamId: input.streamId, kind: args.kind };
        enqueue.assign({ spawned: context.spawned + 1 });
        return;
      }
      enqueue.assign(({ spawn }) => {
        // `spawned` numbers every stream, so it also names each new actor uniquely.
        const ref = spawn('stream', { id: `stream-${context.spawned}`, input });
        context.streams[args.key] = { ref, streamId: input.streamId, kind: args.kind };
        return { spawned: context.spawned + 1 };
      });
    }),
    stopAllStreams: act(({ context, enqueue }) => {
      for (const entry of Object.values(context.streams)) enqueue.stopChild(entry.ref);
      for (const pooled of context.pool) enqueue.stopChild(pooled);
      enqueue.assign({ streams: {}, cursors: {}, pool: [] });
    }),
    /** The cursor moved: recorded (in place, see `ClientContext`) and persisted. */
    recordCursor: act(({ context, enqueue, event }) => {
      if (event.type !== 'stream.cursor') return;
      const existing = context.cursors[event.key];
      // Replaced, not mutated: a record already handed to the store holds the old entry.
      if (existing) context.cursors[event.key] = { ...existing, lastEventId: event.lastEventId };
      enqueue({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),
    /**
     * A message that came as an SSE event carries its stream's cursor: recorded and persisted here as a
     * `stream.cursor` would be (streams send one event per message, not two). A report from a stream that
     * has been replaced moves nothing.
     */
    recordMessageCursor: act(({ context, enqueue, event }) => {
      if ((event.type !== 'stream.message' && event.type !== 'stream.messages') || !event.cursor) return;
      if (context.streams[event.key]?.streamId !== event.streamId) return;
      const existing = context.cursors[event.key];
      if (existing) context.cursors[event.key] = { ...existing, lastEventId: event.cursor.lastEventId };
      enqueue({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),
    /** The same, after events this transition raised: it keeps the order a separate `stream.cursor` had. */
    raiseMessageCursor: act(({ enqueue, event }) => {
      if (event.type !== 'stream.message' || !event.cursor) return;
      enqueue.raise({
        type: 'stream.cursor',
        key: event.key,
        streamId: event.streamId,
        lastEventId: event.cursor.lastEventId,
      });
    }),
    persist: act(({ context, enqueue }) => {
      enqueue({ type: 'persistCursor', params: { record: cursorRecordOf(context) } });
    }),
    forwardGap: act(({ context, enqueue, event }) => {
      if (event.type !== 'stream.gap') return;
      enqueue({
        type: 'notifyGap',
        params: { ...event.gap, streamKey: event.key, sessionId: context.sessionId },
      });
    }),
  },
  guards: {
    isStaleReport: ({ context, event }) =>
      'streamId' in event && context.streams[event.key]?.streamId !== event.streamId,
  },
});
