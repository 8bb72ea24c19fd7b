import { randomUUID } from 'node:crypto';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../../../machines/client/limits.js';
import { PROTOCOL_VERSION_META } from '../../../machines/client/modern-call-wire.js';
import { CLIENT_CAPABILITIES_META_KEY } from '../../../machines/continuity-extension.js';
import type { JsonRpcMessage, JsonRpcRequest } from '../../../machines/jsonrpc.js';
import {
  DEFAULT_FOLLOW_POLICY,
  type FollowAction,
  type FollowFact,
  type FollowOutcome,
  type FollowPolicy,
  followAnswer,
  startFollow,
  taskHandleOf,
} from '../../../machines/tasks/task-follow.js';
import {
  type ListenAction,
  type ListenFact,
  listenFollowStep,
  startListenFollow,
} from '../../../machines/tasks/task-follow-listen.js';
import { DEFAULT_JOURNAL_POLICY, type JournalPolicy } from '../../../machines/tasks/task-journal.js';
import { TASKS_EXTENSION, type TaskError } from '../../../machines/tasks/task-record.js';
import { readCappedText } from '../read-capped.js';
import { type JournalBook, journalBookOf, type TaskJournalStore } from './task-journal.js';
import { TaskListenStream } from './task-listen-stream.js';

/**
 * `continuityFetch({ tasks })`: what the client does with a task handle (docs/tasks.md, "The client").
 * Without it a `resultType: "task"` answer reaches the SDK as it came.
 */
export interface TaskFollowOptions {
  /** Poll interval floor and cap, retry backoff, and how long an unreachable server is retried. */
  readonly policy?: Partial<FollowPolicy>;
  /**
   * Read the task's states from a task listen (`subscriptions/listen`, `notifications/tasks`) when the
   * server offers one, instead of polling `tasks/get`; back to polling when it does not, or when the
   * listen keeps breaking (docs/tasks.md, "Listening instead of polling"). Default false.
   */
  readonly listen?: boolean;
  /**
   * Told the task id as soon as a handle arrives, before the first poll: journal it, and a restarted
   * process resumes the same task with `followTask` (a re-issue of the call's key would also get it back).
   */
  readonly onTask?: (handle: {
    readonly taskId: string;
    readonly url: string;
    readonly toolName: string;
  }) => void;
  /**
   * Answers a task's input requests (the draft's `inputRequests`, each key handed here once): returns the
   * `inputResponses` by the same keys. Without it a task that asks for input ends the call with
   * OUTCOME_UNKNOWN (`data.reason: 'input_required'`, the requests and the task id in `data`).
   */
  readonly onInputRequired?: (
    inputRequests: Readonly<Record<string, unknown>>,
    task: { readonly taskId: string },
  ) => Promise<Readonly<Record<string, unknown>>>;
  /**
   * Where each task-declaring call is journaled before its first send (its key, then its task id), so a
   * restarted process making the same call resumes the same task: one task, one charge (docs/tasks.md,
   * "The journal"). `FileTaskJournal` survives a restart; `MemoryTaskJournal` does not. Default: none.
   */
  readonly journal?: TaskJournalStore;
  /** How long a journal entry is kept (default `DEFAULT_JOURNAL_POLICY`: 1 hour, the default task TTL). */
  readonly journalPolicy?: Partial<JournalPolicy>;
}

/** How the follow reaches the server: the call's URL, headers and fetch, and its protocol `_meta`. */
export interface FollowIo {
  readonly url: string | URL;
  readonly headers?: HeadersInit;
  readonly fetch: typeof fetch;
  /** The `_meta` of every `tasks/*` request (protocol version, client capabilities declaring tasks). */
  readonly meta: Readonly<Record<string, unknown>>;
  readonly signal?: AbortSignal;
}

/**
 * Follows the task `taskId` to its end, executing `machines/tasks/task-follow.ts`'s decisions (and, with
 * `options.listen`, `task-follow-listen.ts`'s: how each state is read): each request sent, each wait
 * waited, each listen opened and read, each fact told back. Decides nothing.
 */
export async function followTaskWith(
  io: FollowIo,
  taskId: string,
  options: TaskFollowOptions = {},
  handle?: Record<string, unknown>,
): Promise<FollowOutcome> {
  const policy: FollowPolicy = { ...DEFAULT_FOLLOW_POLICY, ...options.policy };
  const ask = options.onInputRequired;
  let step = startListenFollow(
    startFollow(taskId, ask !== undefined, handle, policy),
    options.listen === true,
    policy,
  );
  let cancelTold = false;
  let listen: TaskListenStream | undefined;
  try {
    for (;;) {
      const action: ListenAction = step.action;
      if (action.kind === 'end') return action.outcome;
      let fact: ListenFact;
      if (io.signal?.aborted && !cancelTold) {
        cancelTold = true;
        fact = { kind: 'app-cancel', at: Date.now() };
      } else if (action.kind === 'ask') {
        const responses = await (ask as NonNullable<typeof ask>)(action.inputRequests, { taskId });
        fact = { kind: 'answers', responses, at: Date.now() };
      } else if (action.kind === 'await-notice') {
        const read = await (listen as TaskListenStream).next(
          cancelTold ? undefined : io.signal,
          action.withinMs,
        );
        if (read === undefined) continue;
        fact = read;
      } else {
        await sleep(action.afterMs, cancelTold ? undefined : io.signal);
        if (io.signal?.aborted && !cancelTold) continue;
        if (action.kind === 'listen') {
          listen?.close();
          // Until the cancel is told, the application's abort ends the listen too; after, it must not.
          const { signal, ...detached } = io;
          listen = TaskListenStream.open(cancelTold ? detached : io, taskId);
          // Its acknowledgement gets the request timeout: a listen taken and never answered must not hang.
          const first = await listen.next(cancelTold ? undefined : signal, policy.requestTimeoutMs);
          if (first === undefined) continue;
          fact = first;
        } else fact = await exchange(io, taskId, action, policy.requestTimeoutMs);
      }
      step = listenFollowStep(step.state, fact, policy);
    }
  } finally {
    listen?.close();
  }
}

/** Where and how `followTask` and `resumeTasks` reach the server. */
export type FollowTaskOptions = TaskFollowOptions & {
  readonly fetch?: typeof fetch;
  /** The headers the client's requests carry (authorization: a task is its creator's only). */
  readonly headers?: HeadersInit;
  readonly signal?: AbortSignal;
  /** Default `2026-07-28`. */
  readonly protocolVersion?: string;
};

function followIo(url: string | URL, options: FollowTaskOptions): FollowIo {
  return {
    url,
    fetch: options.fetch ?? globalThis.fetch,
    meta: tasksMeta(options.protocolVersion ?? '2026-07-28', undefined),
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
}

/**
 * Resumes a task after a restart: `taskId` as journaled from `onTask`, followed to its end on `url`.
 * With `journal` (the store `continuityFetch` journals in), the task's entry is claimed while it is
 * followed and settled by its end (dropped once the outcome is known), as the call's own follow would:
 * the same call made later is then a new call, not this task again.
 */
export async function followTask(
  url: string | URL,
  taskId: string,
  options: FollowTaskOptions = {},
): Promise<FollowOutcome> {
  const book = options.journal ? bookOf(options) : undefined;
  const entry = await book?.adopt(taskId);
  return followJournaled(followIo(url, options), taskId, options, book, entry?.key);
}

/** A task `resumeTasks` followed: its journaled call and how it ended. */
export interface ResumedTask {
  readonly taskId: string;
  readonly toolName: string;
  /** The idempotency key the call was sent with. */
  readonly key: string;
  readonly outcome: FollowOutcome;
}

/** What `resumeTasks` found in the journal for the endpoint. */
export interface ResumedTasks {
  /** Each journaled task of `url`, followed to its end (concurrently). */
  readonly tasks: readonly ResumedTask[];
  /**
   * The tasks whose follow threw (an `onInputRequired` that threw, ...): each with its error. Their entries
   * are released, not settled: a later `resumeTasks` finds them again. One failing never stops the others.
   */
  readonly failed: readonly (Omit<ResumedTask, 'outcome'> & { readonly error: unknown })[];
  /**
   * Calls that stopped before their handle arrived: only the same call made again (same tool and
   * arguments through `continuityFetch` on this journal) re-sends the key and gets its task back.
   */
  readonly unhanded: readonly { readonly key: string; readonly toolName: string }[];
}

/**
 * After a restart, re-attaches to every task the previous process left in `journal` for `url` (docs/tasks.md,
 * "The journal"): each is followed by its journaled id (no call is sent again, so no second task) and its
 * entry settled by its end. The application need not remember the calls it made.
 */
export async function resumeTasks(
  url: string | URL,
  options: FollowTaskOptions & { readonly journal: TaskJournalStore },
): Promise<ResumedTasks> {
  const book = bookOf(options);
  const found = await book.resume(String(url));
  const io = followIo(url, options);
  // Settled, not all: a follow that throws must not leave the others' outcomes unreported.
  const ends = await Promise.allSettled(
    found.follow.map((e) => followJournaled(io, e.taskId as string, options, book, e.key)),
  );
  const tasks: ResumedTask[] = [];
  const failed: (Omit<ResumedTask, 'outcome'> & { error: unknown })[] = [];
  ends.forEach((end, i) => {
    const e = found.follow[i] as (typeof found.follow)[number];
    const task = { taskId: e.taskId as string, toolName: e.toolName, key: e.key };
    if (end.status === 'fulfilled') tasks.push({ ...task, outcome: end.value });
    else failed.push({ ...task, error: end.reason });
  });
  return { tasks, failed, unhanded: found.unhanded.map((e) => ({ key: e.key, toolName: e.toolName })) };
}

function bookOf(options: FollowTaskOptions): JournalBook {
  return journalBookOf(options.journal as TaskJournalStore, {
    ...DEFAULT_JOURNAL_POLICY,
    ...options.journalPolicy,
  });
}

/** Follows `taskId`; the journal entry `key` (when adopted) is settled by the end, released by a throw. */
async function followJournaled(
  io: FollowIo,
  taskId: string,
  options: TaskFollowOptions,
  book: JournalBook | undefined,
  key: string | undefined,
): Promise<FollowOutcome> {
  let outcome: FollowOutcome;
  try {
    outcome = await followTaskWith(io, taskId, options);
  } catch (error) {
    if (key !== undefined) book?.release(key);
    throw error;
  }
  if (key !== undefined) await book?.end(key, { kind: 'task', outcome });
  return outcome;
}

/** The `_meta` of a `tasks/*` request: the protocol version and client capabilities declaring tasks. */
export function tasksMeta(protocolVersion: string, capabilities: unknown): Record<string, unknown> {
  const caps = isObject(capabilities) ? capabilities : {};
  const extensions = isObject(caps.extensions) ? caps.extensions : {};
  return {
    [PROTOCOL_VERSION_META]: protocolVersion,
    [CLIENT_CAPABILITIES_META_KEY]: { ...caps, extensions: { ...extensions, [TASKS_EXTENSION]: {} } },
  };
}

/**
 * The `RequestInit` of a follow's own POST (`tasks/*`, a task listen): the call's headers without its
 * length and `Mcp-Name`, `Mcp-Method` the request's own.
 */
export function tasksPost(
  io: FollowIo,
  request: { readonly method: string } & Record<string, unknown>,
  signal: AbortSignal,
): RequestInit {
  const headers = new Headers(io.headers);
  headers.delete('content-length');
  headers.delete('mcp-name');
  headers.set('mcp-method', request.method);
  headers.set('content-type', 'application/json');
  headers.set('accept', 'application/json, text/event-stream');
  return { method: 'POST', headers, body: JSON.stringify(request), signal };
}

/** Sends one `tasks/*` request and reports what came back as a fact (a throw is a fault). */
export async function exchange(
  io: FollowIo,
  taskId: string,
  action: Extract<FollowAction, { kind: 'get' | 'update' | 'cancel' }>,
  timeoutMs: number = DEFAULT_FOLLOW_POLICY.requestTimeoutMs,
): Promise<FollowFact> {
  const method = `tasks/${action.kind}`;
  const id = `task-${randomUUID()}`;
  const params = {
    taskId,
    ...(action.kind === 'update' ? { inputResponses: action.inputResponses } : {}),
    _meta: io.meta,
  };
  try {
    const response = await io.fetch(
      io.url,
      tasksPost(io, { jsonrpc: '2.0', id, method, params }, AbortSignal.timeout(timeoutMs)),
    );
    const text = await readCappedText(response, DEFAULT_MAX_MESSAGE_BYTES, () => undefined);
    const answer = text === undefined ? undefined : answerOf(text, id);
    return {
      kind: 'answer',
      status: response.status,
      ...(answer?.result !== undefined ? { result: answer.result } : {}),
      ...(answer?.error !== undefined ? { error: answer.error } : {}),
      at: Date.now(),
    };
  } catch {
    return { kind: 'fault', at: Date.now() };
  }
}

/** The response with `id` in a JSON body or an event stream's `data:` lines. */
export function answerOf(text: string, id: string): { result?: unknown; error?: TaskError } | undefined {
  const candidates = text.trimStart().startsWith('{')
    ? [text]
    : text
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5));
  for (const c of candidates) {
    try {
      const m = JSON.parse(c) as { id?: unknown; result?: unknown; error?: TaskError };
      if (m.id === id) return m;
    } catch {
      // Not JSON: not the answer.
    }
  }
  return undefined;
}

/** Waits `ms`, or less when `signal` aborts (never rejects). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A 2026-07-28 `tools/call` declaring the tasks extension in its `_meta` client capabilities (the draft: per request). */
export function declaringTasks(request: JsonRpcRequest): JsonRpcRequest {
  const params = request.params ?? {};
  const meta = isObject(params._meta) ? params._meta : {};
  return { ...request, params: { ...params, _meta: { ...meta, ...tasksMetaOf(request) } } };
}

/** The task handle a call's final response carries (`result.resultType: "task"`), or undefined. */
export function taskHandleIn(response: unknown): Record<string, unknown> | undefined {
  const result = isObject(response) ? response.result : undefined;
  return taskHandleOf(result) !== undefined ? (result as Record<string, unknown>) : undefined;
}

/**
 * Follows the task a `tools/call` was answered with and makes its end that call's JSON-RPC response
 * (under the call's id): what `continuityFetch({ tasks })` hands the SDK instead of the handle.
 */
export async function followCall(
  io: FollowIo,
  call: {
    readonly request: JsonRpcRequest;
    readonly toolName: string;
    readonly handle: Record<string, unknown>;
  },
  options: TaskFollowOptions,
  journal?: {
    /** Stores the task id before the first poll. */
    readonly handle: (taskId: string) => Promise<void>;
    readonly ended: (outcome: FollowOutcome) => Promise<void>;
  },
): Promise<JsonRpcMessage> {
  const taskId = taskHandleOf(call.handle) as string;
  await journal?.handle(taskId);
  options.onTask?.({ taskId, url: String(io.url), toolName: call.toolName });
  const outcome = await followTaskWith(io, taskId, options, call.handle);
  await journal?.ended(outcome);
  return followAnswer(call.request.id, taskId, outcome) as unknown as JsonRpcMessage;
}

/** The `_meta` of the `tasks/*` requests following `request`'s task: its protocol version and capabilities. */
export function tasksMetaOf(request: JsonRpcRequest): Record<string, unknown> {
  const meta = isObject(request.params?._meta) ? request.params._meta : {};
  const version = meta[PROTOCOL_VERSION_META];
  return tasksMeta(typeof version === 'string' ? version : '2026-07-28', meta[CLIENT_CAPABILITIES_META_KEY]);
}
