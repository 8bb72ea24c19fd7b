import { randomUUID } from 'node:crypto';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../../../machines/client/limits.js';
import { encodeMcpName, PROTOCOL_VERSION_META_KEY } from '../../../machines/server/era.js';
import {
  DEFAULT_FOLLOW_POLICY,
  type FollowFact,
  type FollowPolicy,
} from '../../../machines/tasks/task-follow.js';
import {
  requestAnswer,
  requestStep,
  startRequest,
  taskRequestOf,
} from '../../../machines/tasks/task-request-retry.js';
import { readCappedText } from '../read-capped.js';
import { answerOf, exchange, sleep } from './tasks-follow.js';

/**
 * The raw dispatcher for the official `@modelcontextprotocol/ext-tasks` client: its `tools/call` keyed
 * through `continuityFetch`, its `tasks/*` requests retried after a fault instead of failing the task.
 */

/** A JSON value, as `@modelcontextprotocol/ext-tasks` types what its dispatcher sends and gets. */
export type ExtTasksJson =
  | null
  | boolean
  | number
  | string
  | readonly ExtTasksJson[]
  | { readonly [key: string]: ExtTasksJson };

/** What the dispatcher answers: ext-tasks' `JsonRpcResponse` (a result, or the JSON-RPC error). */
export type ExtTasksResponse =
  | { readonly kind: 'result'; readonly result: ExtTasksJson }
  | {
      readonly kind: 'error';
      readonly error: { readonly code: number; readonly message: string; readonly data?: ExtTasksJson };
    };

type ExtTasksError = Extract<ExtTasksResponse, { kind: 'error' }>['error'];

/** ext-tasks' `DispatchOptions`: its abort signal and the call's own headers. */
export interface ExtTasksDispatchOptions {
  readonly signal?: AbortSignal;
  readonly context?: { readonly headers?: Readonly<Record<string, string>> };
}

/** ext-tasks' `RawClientDispatch`: what `createTaskSessionFromClient({ rawDispatch })` takes. */
export type ExtTasksDispatch = (
  request: ExtTasksJson,
  options?: ExtTasksDispatchOptions,
) => Promise<ExtTasksResponse>;

export interface ExtTasksDispatcherOptions {
  /** The MCP endpoint: the URL the SDK transport was given. */
  readonly url: string | URL;
  /**
   * The `continuityFetch(...)` the SDK transport uses (the same instance: it has read the server's
   * `server/discover`, so it knows the continuity extension is there and keys each `tools/call`).
   */
  readonly fetch: typeof fetch;
  /** Headers every request carries (authorization: a task is its creator's only). */
  readonly headers?: HeadersInit;
  /** How a failed `tasks/*` request is retried, and for how long (`retryDelayMs`, `maxPollMs`, `giveUpAfterMs`). */
  readonly policy?: Partial<FollowPolicy>;
}

/**
 * The raw dispatcher an application on the official `@modelcontextprotocol/ext-tasks` client plugs in
 * (`createTaskSessionFromClient(client, { rawDispatch: extTasksDispatcher({ url, fetch }), ... })`), so
 * that package gains what the continuity extension gives without any change to its API
 * (docs/tasks.md, "With @modelcontextprotocol/ext-tasks"):
 *
 * - a `tools/call` goes through `continuityFetch`: keyed, so a re-issue after a cut before the handle
 *   gets the SAME task (one task, one charge), and when no re-issue is safe it is answered OUTCOME_UNKNOWN
 *   (-32050). A failure is thrown as a plain error, which ext-tasks never re-sends (it re-sends once,
 *   without a key, only a `DispatchError` marked retryable).
 * - a `tasks/get`, `tasks/update` or `tasks/cancel` that fails on the way (a cut, a reset, a balancer's
 *   5xx or 429) is sent again with backoff (`machines/tasks/task-request-retry.ts`): ext-tasks' polling
 *   loop, which fails the task on one failed `tasks/get`, never sees it, and a `tasks/update` it would
 *   give up on (freeing the input keys, so the user is asked again) is delivered. Unreachable for
 *   `giveUpAfterMs`, the answer is OUTCOME_UNKNOWN (`data.reason: 'task_unreachable'`, the task id):
 *   ext-tasks reports a failed execution whose error code says the task may still be running.
 *
 * It imports nothing of ext-tasks: its types are written here, structurally the same.
 */
export function extTasksDispatcher(options: ExtTasksDispatcherOptions): ExtTasksDispatch {
  const policy: FollowPolicy = { ...DEFAULT_FOLLOW_POLICY, ...options.policy };
  const url = String(options.url);
  return async (request, dispatch = {}) => {
    const headers = new Headers(options.headers);
    for (const [name, value] of Object.entries(dispatch.context?.headers ?? {})) headers.set(name, value);
    const task = taskRequestOf(request);
    if (!task) return send(url, options.fetch, headers, request, dispatch.signal);
    // The server runs a task's next round with a tasks/update's headers: they name the protocol too.
    const version = task.meta[PROTOCOL_VERSION_META_KEY];
    if (typeof version === 'string') headers.set('mcp-protocol-version', version);
    const io = { url, headers, fetch: options.fetch, meta: task.meta };
    let step = startRequest(task.taskId, task.request, policy);
    let fact: FollowFact = { kind: 'fault', at: Date.now() };
    while (step.kind === 'send') {
      await sleep(step.afterMs, dispatch.signal);
      dispatch.signal?.throwIfAborted();
      fact = await exchange(io, task.taskId, task.request);
      step = requestStep(step.state, fact, policy);
    }
    return requestAnswer(step, fact, task.taskId) as ExtTasksResponse;
  };
}

/** One POST (a `tools/call` through `continuityFetch`, keyed there) and the response with its id. */
async function send(
  url: string,
  fetch: typeof globalThis.fetch,
  headers: Headers,
  request: ExtTasksJson,
  signal: AbortSignal | undefined,
): Promise<ExtTasksResponse> {
  const id = `ext-tasks-${randomUUID()}`;
  const body: Record<string, ExtTasksJson> = {
    ...(request as Record<string, ExtTasksJson>),
    jsonrpc: '2.0',
    id,
  };
  const params = (body.params ?? {}) as Record<string, ExtTasksJson>;
  const meta = (params._meta ?? {}) as Record<string, ExtTasksJson>;
  const version = meta[PROTOCOL_VERSION_META_KEY];
  // The standard headers the server cross-checks against the body (the v2 SDK transport sets the same).
  headers.set('content-type', 'application/json');
  headers.set('accept', 'application/json, text/event-stream');
  headers.set('mcp-method', String(body.method));
  headers.delete('mcp-name');
  if (typeof version === 'string') headers.set('mcp-protocol-version', version);
  if (body.method === 'tools/call' && typeof params.name === 'string')
    headers.set('mcp-name', encodeMcpName(params.name));
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal });
  const text = await readCappedText(response, DEFAULT_MAX_MESSAGE_BYTES);
  const answer = text === undefined ? undefined : answerOf(text, id);
  if (answer?.error) return { kind: 'error', error: answer.error as ExtTasksError };
  if (answer && 'result' in answer) return { kind: 'result', result: answer.result as ExtTasksJson };
  // A plain Error: ext-tasks never re-sends it (a re-send without a key could run the call twice).
  throw new Error(`${String(body.method)} answered HTTP ${response.status} without a JSON-RPC response`);
}
