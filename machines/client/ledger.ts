import { JsonRpcCode, type OutcomeUnknownReason } from '../codes.js';
import type { JsonRpcError, JsonRpcMessage, JsonRpcRequest, RequestId } from '../jsonrpc.js';
import { isResponse, requestKey } from '../jsonrpc.js';
import { taggedByAnother } from '../request-tag.js';

/**
 * The client's request ledger: every request the application sent, until it is settled. A request is
 * settled exactly once (answered, failed, or outcome unknown) by leaving the ledger: it holds only what is
 * in flight, so it stays as small as the calls outstanding, and an entry is pending by being there. Plain
 * data and functions, no I/O.
 *
 * The ledger is updated in place, so these functions return nothing. Copying it on every call (spread to
 * add, computed-key rest to remove) cost ~66 µs per update with 50 calls in flight, three updates per call
 * (docs/benchmarks.md, row 2); in place it is O(1). Only the client session machine holds a ledger, and
 * nothing outside it keeps a reference that could see it change.
 */
export interface LedgerEntry {
  readonly request: JsonRpcRequest;
  /** Times this request was put on the wire on a new session after a session loss. */
  readonly resends: number;
}

export type Ledger = Record<string, LedgerEntry>;

/** MCP tool annotations the client learned from `tools/list`, by tool name. */
export type ToolAnnotations = Readonly<Record<string, { readOnlyHint?: boolean; idempotentHint?: boolean }>>;

/**
 * Decides whether a request whose outcome is unknown may be sent again on a new session.
 * The default never re-sends a call that could have a side effect twice.
 */
export type RetryPolicy = (request: JsonRpcRequest, annotations: ToolAnnotations) => boolean;

/** MCP methods that only read. Re-sending them cannot duplicate a side effect. */
const READ_ONLY_METHODS: ReadonlySet<string> = new Set([
  'ping',
  'tools/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
]);

/** Re-send reads, and tool calls the server annotated `readOnlyHint` or `idempotentHint`. Nothing else. */
export const defaultRetryPolicy: RetryPolicy = (request, annotations) => {
  if (READ_ONLY_METHODS.has(request.method)) return true;
  if (request.method !== 'tools/call') return false;
  const name = request.params?.name;
  if (typeof name !== 'string') return false;
  const hints = annotations[name];
  return hints?.readOnlyHint === true || hints?.idempotentHint === true;
};

export function ledgerAdd(ledger: Ledger, request: JsonRpcRequest): void {
  ledger[requestKey(request.id)] = { request, resends: 0 };
}

export function ledgerGet(ledger: Ledger, id: RequestId): LedgerEntry | undefined {
  return ledger[requestKey(id)];
}

/** The pending entry under a request key (a request stream's key is its request's key). */
export function pendingByKey(ledger: Ledger, key: string): LedgerEntry | undefined {
  return ledger[key];
}

/**
 * Settles a pending entry by removing it. Settling twice is a no-op, and a replayed answer for a settled
 * id finds no entry, so it goes to the orphan path (`inboundOf`) and never reaches the caller twice.
 */
export function ledgerSettle(ledger: Ledger, id: RequestId): void {
  delete ledger[requestKey(id)];
}

/** What an incoming message is to this process (see `inboundOf`). */
export type Inbound =
  | { readonly kind: 'answer'; readonly entry: LedgerEntry }
  | { readonly kind: 'orphan' }
  | { readonly kind: 'message' };

/**
 * The client's one orphan rule: a message is an orphan when it concerns a request this process does not
 * wait for, and it then goes to `onOrphanResult`, never to a caller.
 * - A response to a pending request is its answer.
 * - Any other response is an orphan: an answer to a request this process never sent (a replay of a dead
 *   process's stream, after a restart) or already settled (a replay must never be delivered twice).
 * - A progress notification whose token another owner tagged (machines/request-tag.ts) is an orphan: it
 *   belongs to a dead process's call, and must not reach a live call whose untagged token is the same.
 * - Anything else is for the application.
 * `owner`: this process's tag (undefined when ids are not tagged, as in the simulations).
 */
export function inboundOf(ledger: Ledger, owner: string | undefined, message: JsonRpcMessage): Inbound {
  if (isResponse(message)) {
    const entry = message.id === null ? undefined : ledgerGet(ledger, message.id);
    return entry ? { kind: 'answer', entry } : { kind: 'orphan' };
  }
  if ('method' in message && message.method === 'notifications/progress') {
    const token = message.params?.progressToken;
    if ((typeof token === 'string' || typeof token === 'number') && taggedByAnother(owner, token))
      return { kind: 'orphan' };
  }
  return { kind: 'message' };
}

export function pendingEntries(ledger: Ledger): LedgerEntry[] {
  return Object.values(ledger);
}

/**
 * The session is gone with requests in flight. Each pending request is either re-sent on the new session
 * (policy allows) or settled as outcome unknown. Nothing is re-sent blindly, nothing stays pending.
 */
export function ledgerOnSessionLost(
  ledger: Ledger,
  policy: RetryPolicy,
  annotations: ToolAnnotations,
): { resend: JsonRpcRequest[]; unknown: JsonRpcRequest[] } {
  const resend: JsonRpcRequest[] = [];
  const unknown: JsonRpcRequest[] = [];
  for (const entry of pendingEntries(ledger)) {
    if (policy(entry.request, annotations)) {
      resend.push(entry.request);
      ledger[requestKey(entry.request.id)] = { ...entry, resends: entry.resends + 1 };
    } else {
      unknown.push(entry.request);
      ledgerSettle(ledger, entry.request.id);
    }
  }
  return { resend, unknown };
}

/** The JSON-RPC error the application receives for a call whose outcome is unknown. */
export function outcomeUnknownError(
  id: RequestId,
  reason: OutcomeUnknownReason,
  detail?: string,
): JsonRpcError {
  return {
    jsonrpc: '2.0',
    id,
    error: {
      code: JsonRpcCode.OUTCOME_UNKNOWN,
      message: `Outcome unknown (${reason}): the request may or may not have run on the server; it was not re-sent`,
      data: { reason, ...(detail ? { detail } : {}) },
    },
  };
}

/** Learns tool annotations from a `tools/list` result. */
export function learnAnnotations(current: ToolAnnotations, result: unknown): ToolAnnotations {
  const tools = (result as { tools?: unknown })?.tools;
  if (!Array.isArray(tools)) return current;
  const next: Record<string, { readOnlyHint?: boolean; idempotentHint?: boolean }> = { ...current };
  for (const tool of tools) {
    if (typeof tool?.name !== 'string') continue;
    const a = tool.annotations ?? {};
    next[tool.name] = { readOnlyHint: a.readOnlyHint === true, idempotentHint: a.idempotentHint === true };
  }
  return next;
}
