import type { NetworkFault } from './io.js';

/**
 * Names a failed fetch in the machines' vocabulary. `refused` only when the connection provably never
 * opened (the request never left), since that alone makes re-sending a POST safe without de-duplication.
 * Node 20's fetch reports a mid-stream reset as `TypeError: terminated` with cause ECONNRESET or
 * UND_ERR_SOCKET.
 */
const REFUSED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const TIMEOUT = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

export function faultOf(error: unknown): NetworkFault {
  const code = errorCode(error);
  if (code !== undefined && REFUSED.has(code)) return 'refused';
  if ((code !== undefined && TIMEOUT.has(code)) || (error as { name?: string })?.name === 'TimeoutError')
    return 'timeout';
  return 'reset';
}

function errorCode(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 4 && e; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) e = errors[0];
    else e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
