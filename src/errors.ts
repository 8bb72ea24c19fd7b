import { ErrorCode } from '../machines/codes.js';

/**
 * Errors this package reports through `Transport.onerror`, each with a stable code to match on (the
 * message is for people). Branded with `Symbol.for` so `isContinuityError` works across package copies.
 * The codes are tabled with every other code in machines/codes.ts.
 */
export { ErrorCode };

const BRAND = Symbol.for('mcp-continuity.error');

export class ContinuityError extends Error {
  readonly [BRAND] = true;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly detail?: unknown,
  ) {
    super(message);
    this.name = 'ContinuityError';
  }
}

export function isContinuityError(error: unknown): error is ContinuityError {
  return typeof error === 'object' && error !== null && (error as { [BRAND]?: unknown })[BRAND] === true;
}
