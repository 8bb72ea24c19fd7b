/**
 * The JSON-RPC shape a POSTed message must have before a session sees it. It mirrors what the official
 * SDK's `JSONRPCMessageSchema` (1.32) accepts: the SDK silently drops a message its schema rejects, so a
 * request that got past us but not past it was never answered and kept its session busy forever. Every
 * message either passes both or is answered 400 here. `test/server/message-shape.test.ts` checks the
 * two agree on generated messages.
 *
 * Pure and iterative: nothing here recurses into the body.
 */

export type MessageKind = 'request' | 'notification' | 'result' | 'error';

export type MessageShape =
  | { readonly ok: true; readonly kind: MessageKind }
  | { readonly ok: false; readonly problem: string };

/** What the SDK's `RELATED_TASK_META_KEY` names; its value must be `{ taskId: string }`. */
const RELATED_TASK_KEY = 'io.modelcontextprotocol/related-task';

const ALLOWED_MEMBERS: Record<MessageKind, ReadonlySet<string>> = {
  request: new Set(['jsonrpc', 'id', 'method', 'params']),
  notification: new Set(['jsonrpc', 'method', 'params']),
  result: new Set(['jsonrpc', 'id', 'result']),
  error: new Set(['jsonrpc', 'id', 'error']),
};

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A JSON-RPC id as the SDK takes it: a string, or a safe integer (zod's `int()`). */
export const isRequestId = (value: unknown): value is string | number =>
  typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value));

const has = (o: Record<string, unknown>, key: string): boolean => Object.hasOwn(o, key);

function metaProblem(container: Record<string, unknown>, where: string): string | undefined {
  if (!has(container, '_meta')) return undefined;
  const meta = container._meta;
  if (!isObject(meta)) return `${where}._meta must be an object`;
  if (has(meta, 'progressToken') && !isRequestId(meta.progressToken)) {
    return `${where}._meta.progressToken must be a string or an integer`;
  }
  if (has(meta, RELATED_TASK_KEY)) {
    const task = meta[RELATED_TASK_KEY];
    if (!isObject(task) || typeof task.taskId !== 'string') {
      return `${where}._meta["${RELATED_TASK_KEY}"].taskId must be a string`;
    }
  }
  return undefined;
}

function kindOf(message: Record<string, unknown>): MessageKind | undefined {
  if (has(message, 'method')) return has(message, 'id') ? 'request' : 'notification';
  if (has(message, 'result')) return 'result';
  if (has(message, 'error')) return 'error';
  return undefined;
}

/** Checks one parsed JSON value against the JSON-RPC 2.0 message shapes the SDK accepts. */
export function checkMessageShape(body: unknown): MessageShape {
  const bad = (problem: string): MessageShape => ({ ok: false, problem });
  if (!isObject(body) || body.jsonrpc !== '2.0') return bad('not a JSON-RPC 2.0 message');
  const kind = kindOf(body);
  if (kind === undefined) return bad('not a request, notification or response');
  const allowed = ALLOWED_MEMBERS[kind];
  for (const key of Object.keys(body)) {
    if (!allowed.has(key)) return bad(`unknown member "${key.slice(0, 64)}" in a ${kind}`);
  }
  if (
    (kind === 'request' || kind === 'result' || (kind === 'error' && has(body, 'id'))) &&
    !isRequestId(body.id)
  ) {
    return bad('id must be a string or an integer');
  }
  if (kind === 'request' || kind === 'notification') {
    if (typeof body.method !== 'string') return bad('method must be a string');
    if (has(body, 'params')) {
      if (!isObject(body.params)) return bad('params must be an object');
      const problem = metaProblem(body.params, 'params');
      if (problem) return bad(problem);
    }
  } else if (kind === 'result') {
    if (!isObject(body.result)) return bad('result must be an object');
    const problem = metaProblem(body.result, 'result');
    if (problem) return bad(problem);
  } else {
    const error = body.error;
    if (!isObject(error)) return bad('error must be an object');
    if (typeof error.code !== 'number' || !Number.isSafeInteger(error.code)) {
      return bad('error.code must be an integer');
    }
    if (typeof error.message !== 'string') return bad('error.message must be a string');
  }
  return { ok: true, kind };
}

/**
 * True when `text` nests arrays and objects deeper than `maxDepth`. A linear scan of the text, before
 * `JSON.parse`: nothing built from a hostile body recurses as deep as the body asks (the SDK's schema
 * checks and `JSON.stringify` do).
 */
export function exceedsJsonDepth(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > maxDepth) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}
