import { randomBytes } from 'node:crypto';
import { memoKey, readContinuityMeta, requestFingerprint } from '../../../machines/continuity-extension.js';
import type { JsonRpcRequest } from '../../../machines/jsonrpc.js';
import {
  ACK,
  answerGet,
  answerReissue,
  decideCancel,
  decideRunEnd,
  decideUpdate,
  declaresTasks,
  newTaskRecord,
  type RunAnswer,
  type TaskChange,
  type TaskReply,
  taskCallOf,
  taskFor,
  taskIdOf,
  toolParams,
} from '../../../machines/tasks/task-decide.js';
import {
  DEFAULT_LEASE_MS,
  DEFAULT_TASK_TIMING,
  decideLeaseLapse,
  decideRenewal,
  listenReadEveryMs,
  renewEveryMs,
} from '../../../machines/tasks/task-lease.js';
import { planTaskListen, taskListenAck, taskNotices } from '../../../machines/tasks/task-listen.js';
import {
  createTaskResult,
  MISSING_CLIENT_CAPABILITY_CODE,
  TASK_METHODS,
  TASK_NOT_FOUND_CODE,
  TASKS_EXTENSION,
  type TaskRecord,
} from '../../../machines/tasks/task-record.js';
import { sdkMessages } from '../keyed/sdk-messages.js';
import type { RunOnSdk } from '../modern/keyed-hook.js';
import { processWakes, type WakePort } from '../wake-port.js';
import type { TaskStore } from './task-store.js';

/** The tasks extension of `createContinuityServer` for MCP 2026-07-28 (`modern.tasks`; docs/tasks.md). */
export interface TasksOptions {
  /** Where tasks are kept: `MemoryTaskStore`, `SqliteTaskStore` (survives a restart), `RedisTaskStore` (shared). */
  readonly store: TaskStore;
  /**
   * The tools answered with a task handle (`resultType: "task"`) when the client declared
   * `io.modelcontextprotocol/tasks` on the call; other calls are served as before.
   */
  readonly taskTools: readonly string[] | ((toolName: string) => boolean);
  /** Each task's `ttlMs`, from creation; `null`: unlimited. Default one hour. */
  readonly ttlMs?: number | null;
  /** The `pollIntervalMs` suggested to clients. Default 1,000. */
  readonly pollIntervalMs?: number;
  /** How long an expired task is still answered "expired" (and its key still bound) before it is deleted. Default 10 minutes. */
  readonly keepExpiredMs?: number;
  /** Longest continuity-extension idempotency key accepted on a creating call. Default 255. */
  readonly maxKeyLength?: number;
  /**
   * The lease of a task's run: the instance running it renews it every third of this; a working task
   * whose lease lapsed (its instance died) is answered failed, outcome unknown, by any instance. Default
   * 30 s (`DEFAULT_LEASE_MS`).
   */
  readonly leaseMs?: number;
  /** Injectable clock (tests). */
  readonly now?: () => number;
  /**
   * The host's wake port: every lease renewal and every task listen's next store read is a wake-up of
   * it (the runtime holds no timer of its own). Default: the process's shared port (`processWakes`).
   */
  readonly wakes?: WakePort;
  /** Told of failures that reach no client (a run's outcome that could not be written). */
  readonly onError?: (error: unknown) => void;
}

/** The runtime behind `TasksOptions`: what the 2026-07-28 endpoint hands each modern request first. */
export interface Tasks {
  /** What `server/discover` advertises: `{ extensions: { 'io.modelcontextprotocol/tasks': {} } }`. */
  readonly capability: { readonly extensions: Record<string, Record<string, never>> };
  /**
   * Serves a task-creating `tools/call` or a `tasks/*` request; undefined for anything else (the endpoint
   * serves it unchanged). `run` runs one `tools/call` on the application's v2 server, detached from the
   * client's connection (a cut never stops a task).
   */
  serve(message: JsonRpcRequest, principal: string | undefined, run: RunOnSdk): Promise<Response> | undefined;
  /**
   * Serves a `subscriptions/listen` that asks for `notifications/tasks` alone (`notifications.taskIds`):
   * an event stream of the acknowledgement, then each task's DetailedTask whenever it changes, on
   * whichever instance; undefined for any other listen (the endpoint serves it as before).
   */
  listen(body: unknown, principal: string | undefined, signal: AbortSignal): Response | undefined;
  /** Stops this process's runs (their tasks stay as stored). */
  close(): Promise<void>;
}

/** Compare-and-set attempts before a change gives up (each loser re-reads: someone else changed the task). */
const CAS_ATTEMPTS = 8;

/**
 * Creates the tasks runtime. It decides nothing: `machines/tasks/task-decide.ts` does; this reads and
 * writes the store, runs tools on the SDK and relays answers.
 */
export function createTasks(options: TasksOptions): Tasks {
  const { store } = options;
  const now = options.now ?? Date.now;
  const listed = options.taskTools;
  const isTaskTool = typeof listed === 'function' ? listed : (n: string) => listed.includes(n);
  const ttlMs = options.ttlMs === undefined ? DEFAULT_TASK_TIMING.ttlMs : options.ttlMs;
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_TASK_TIMING.pollIntervalMs;
  const keepExpiredMs = options.keepExpiredMs ?? DEFAULT_TASK_TIMING.keepExpiredMs;
  const maxKeyLength = options.maxKeyLength ?? 255;
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const onError = options.onError ?? (() => undefined);
  const wakes = options.wakes ?? processWakes;
  /** Runs of this process, by task id: a cancel stops them. */
  const runs = new Map<string, AbortController>();
  /** Task listen streams of this process, woken by a change made here (others' are read at each poll). */
  const watchers = new Set<() => void>();

  /** Applies a decision to the stored task with compare-and-set, re-deciding on a lost race. */
  const change = async (
    taskId: string,
    decide: (r: TaskRecord) => TaskChange,
  ): Promise<TaskChange & { readonly stored?: TaskRecord }> => {
    let record = await store.get(taskId);
    for (let i = 0; i < CAS_ATTEMPTS && record; i++) {
      const c = decide(record);
      if (!c.next) return { ...c, stored: record };
      const after = await store.replace(c.next, record.version);
      if (after === c.next) {
        for (const wake of [...watchers]) wake();
        return { ...c, stored: after };
      }
      record = after;
    }
    return {};
  };

  /** A task whose run's lease lapsed (its instance died) is written failed before anyone reads it. */
  const lapsed = async (record: TaskRecord | undefined): Promise<TaskRecord | undefined> => {
    if (!record || decideLeaseLapse(record, now()) === undefined) return record;
    const done = await change(record.taskId, (r) => {
      const next = decideLeaseLapse(r, now());
      return next ? { next } : {};
    });
    return done.stored ?? (await store.get(record.taskId));
  };

  const startRun = (record: TaskRecord, params: Record<string, unknown>, run: RunOnSdk): void => {
    const controller = new AbortController();
    runs.get(record.taskId)?.abort();
    runs.set(record.taskId, controller);
    const id = `task-${record.taskId}-${record.round}`;
    const message = { jsonrpc: '2.0', id, method: 'tools/call', params } as JsonRpcRequest;
    // Renews the run's lease while it goes on; a task ended elsewhere (cancelled on another instance)
    // stops the run here.
    let renewal: Promise<unknown> = Promise.resolve();
    const renewing = wakes.every(renewEveryMs(leaseMs), () => {
      renewal = change(record.taskId, (r) => {
        const d = decideRenewal(r, record.round, now(), leaseMs);
        if (d.kind === 'stop') controller.abort();
        return d.kind === 'renew' ? { next: d.next } : {};
      }).catch(onError);
    });
    controller.signal.addEventListener('abort', () => renewing.cancel(), { once: true });
    void (async () => {
      let answer: RunAnswer = { kind: 'lost', why: 'no answer from the tool' };
      try {
        const response = await run(message, controller.signal);
        for await (const m of sdkMessages(response, controller.signal)) {
          const o = m as {
            id?: unknown;
            result?: unknown;
            error?: RunAnswer & { code: number; message: string };
          };
          if (o.id !== id) continue;
          if (o.error) answer = { kind: 'error', error: o.error };
          else if (o.result !== undefined) answer = { kind: 'result', result: o.result };
        }
      } catch (error) {
        answer = { kind: 'lost', why: error instanceof Error ? error.message : String(error) };
      }
      renewing.cancel();
      await renewal;
      if (controller.signal.aborted) return;
      try {
        await change(record.taskId, (r) => {
          const next = decideRunEnd(r, answer, now());
          return next ? { next } : {};
        });
      } catch (error) {
        onError(error);
      } finally {
        if (runs.get(record.taskId) === controller) runs.delete(record.taskId);
      }
    })();
  };

  const create = async (message: JsonRpcRequest, principal: string, run: RunOnSdk): Promise<Response> => {
    const request = taskCallOf(message, isTaskTool);
    if (!request) return reply({ kind: 'error', error: invalid('not a task call'), status: 200 }, message.id);
    const reading = readContinuityMeta(message.params, maxKeyLength, 'tools/call');
    if (reading.kind === 'invalid')
      return reply({ kind: 'error', error: invalid(reading.why), status: 200 }, message.id);
    const fingerprint = requestFingerprint('tools/call', message.params);
    const record = newTaskRecord({
      taskId: randomBytes(18).toString('base64url'),
      principal,
      ...(reading.kind === 'keyed' ? { keyRef: memoKey(principal, reading.key) } : {}),
      fingerprint,
      request,
      now: now(),
      ttlMs,
      pollIntervalMs,
      keepExpiredMs,
      leaseMs,
    });
    // Durable before the handle is sent (the draft: a tasks/get for it must resolve); a key already bound
    // gets its task back, and nothing runs again.
    const created = await store.create(record);
    if (created.kind === 'exists')
      return reply(answerReissue(created.record, fingerprint, now()), message.id);
    startRun(record, toolParams(request), run);
    return reply({ kind: 'result', result: createTaskResult(record) }, message.id);
  };

  const operate = async (message: JsonRpcRequest, principal: string, run: RunOnSdk): Promise<Response> => {
    if (!declaresTasks(message.params))
      return reply(
        {
          kind: 'error',
          error: {
            code: MISSING_CLIENT_CAPABILITY_CODE,
            message: 'Missing required client capability',
            data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
          },
          status: 200,
        },
        message.id,
      );
    const taskId = taskIdOf(message.params);
    if (taskId === undefined)
      return reply({ kind: 'error', error: invalid('taskId is required'), status: 200 }, message.id);
    const what =
      message.method === 'tasks/get'
        ? 'Failed to retrieve task'
        : `Failed to ${message.method.slice(6)} task`;
    const found = taskFor(await lapsed(await store.get(taskId)), principal, now(), what);
    if (found.kind === 'reply') return reply(found.reply, message.id);
    if (message.method === 'tasks/get') return reply(answerGet(found.record), message.id);
    const inputResponses = (message.params as { inputResponses?: unknown } | undefined)?.inputResponses;
    const done =
      message.method === 'tasks/update'
        ? await change(taskId, (r) => decideUpdate(r, inputResponses, now(), leaseMs))
        : await change(taskId, (r) => decideCancel(r, now()));
    if (done.abort) {
      runs.get(taskId)?.abort();
      runs.delete(taskId);
    }
    if (done.rerun && done.next) startRun(done.next, done.rerun, run);
    return reply(ACK, message.id);
  };

  return {
    capability: { extensions: { [TASKS_EXTENSION]: {} } },
    serve(message, principal, run) {
      const who = principal ?? '';
      if (TASK_METHODS.has(message.method) && message.id !== undefined) return operate(message, who, run);
      if (taskCallOf(message, isTaskTool)) return create(message, who, run);
      return undefined;
    },
    listen(body, principal, signal) {
      const plan = planTaskListen(body);
      const id = (body as { id?: JsonRpcRequest['id'] }).id ?? null;
      if (plan.kind === 'pass') return undefined;
      if (plan.kind === 'refuse') return Response.json({ jsonrpc: '2.0', id, error: plan.error });
      const who = principal ?? '';
      const read = async (ids: readonly string[]) =>
        new Map(await Promise.all(ids.map(async (t) => [t, await lapsed(await store.get(t))] as const)));
      return eventStream(signal, async (write, open) => {
        const ack = taskListenAck(plan.taskIds, await read(plan.taskIds), who, now());
        write(ack.message);
        let sent: ReadonlyMap<string, number> = new Map();
        while (open()) {
          const step = taskNotices(sent, await read(ack.taskIds));
          for (const n of step.notices) write(n);
          sent = step.sent;
          await new Promise<void>((resolve) => {
            const wake = () => {
              timer.cancel();
              watchers.delete(wake);
              signal.removeEventListener('abort', wake);
              resolve();
            };
            const timer = wakes.after(listenReadEveryMs(pollIntervalMs), wake);
            watchers.add(wake);
            signal.addEventListener('abort', wake, { once: true });
          });
        }
      });
    },
    async close() {
      for (const c of runs.values()) c.abort();
      runs.clear();
      for (const wake of [...watchers]) wake();
    },
  };
}

const invalid = (why: string) => ({ code: TASK_NOT_FOUND_CODE, message: `Invalid params: ${why}` });

/** A decided reply as an HTTP JSON response under the request's id. */
function reply(answer: TaskReply, id: JsonRpcRequest['id']): Response {
  const body =
    answer.kind === 'result'
      ? { jsonrpc: '2.0', id, result: answer.result }
      : { jsonrpc: '2.0', id, error: answer.error };
  return Response.json(body, { status: answer.kind === 'result' ? 200 : answer.status });
}

/**
 * An event stream (`text/event-stream`) that `body` writes JSON-RPC messages to until the client goes
 * away (`signal`) or cancels the body; `open()` says whether it still may.
 */
function eventStream(
  signal: AbortSignal,
  body: (write: (m: unknown) => void, open: () => boolean) => Promise<void>,
): Response {
  const encoder = new TextEncoder();
  let closed = false;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (m: unknown) => {
        if (closed) return;
        try {
          controller.enqueue(encoder.encode(`event: message\ndata: ${JSON.stringify(m)}\n\n`));
        } catch {
          closed = true;
        }
      };
      void body(write, () => !closed && !signal.aborted)
        .catch(() => undefined)
        .finally(() => {
          if (closed) return;
          closed = true;
          try {
            controller.close();
          } catch {
            // Already cancelled by the reader.
          }
        });
    },
    cancel() {
      closed = true;
    },
  });
  return new Response(stream, {
    status: 200,
    headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
  });
}
