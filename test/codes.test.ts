import { describe, expect, it } from 'vitest';
import {
  ContinuityErrorCode,
  ErrorCode,
  JsonRpcCode,
  OutcomeUnknownReason,
  ReconnectReason,
  ResumeRejection,
  StopReason,
} from '../machines/codes.js';
import { ErrorCode as PublicErrorCode } from '../src/errors.js';
import * as packageRoot from '../src/index.js';

describe('codes are tabled once and never collide', () => {
  it.each([
    ['JsonRpcCode', JsonRpcCode],
    ['OutcomeUnknownReason', OutcomeUnknownReason],
    ['ResumeRejection', ResumeRejection],
    ['ReconnectReason', ReconnectReason],
    ['StopReason', StopReason],
    ['ErrorCode', ErrorCode],
  ])('%s values are unique', (_, table) => {
    const values = Object.values(table);
    expect(new Set(values).size).toBe(values.length);
  });

  it('the continuity extension codes collide with no other JSON-RPC code, and sit where 2026-07-28 leaves room', () => {
    const ours = new Set<number>(Object.values(JsonRpcCode));
    for (const code of Object.values(ContinuityErrorCode)) {
      expect(ours.has(code)).toBe(false);
      expect(code).toBeLessThanOrEqual(-32000);
      expect(code).toBeGreaterThanOrEqual(-32019);
    }
    expect(JsonRpcCode.LIMIT_EXCEEDED).toBeGreaterThanOrEqual(-32019);
  });

  it('JSON-RPC codes of our own sit in the implementation-defined server range', () => {
    for (const code of [
      JsonRpcCode.OUTCOME_UNKNOWN,
      JsonRpcCode.RESUME_REJECTED,
      JsonRpcCode.UNEXPECTED_STATUS,
      JsonRpcCode.REQUEST_FAILED,
    ]) {
      expect(code).toBeLessThanOrEqual(-32000);
      expect(code).toBeGreaterThanOrEqual(-32099);
    }
  });

  it('the onerror codes are the same table, wherever they are imported from', () => {
    expect(PublicErrorCode).toBe(ErrorCode);
    expect(packageRoot.ErrorCode).toBe(ErrorCode);
    expect(packageRoot.JsonRpcCode).toBe(JsonRpcCode);
  });

  it("JSON-RPC's own codes keep the specification's values", () => {
    expect([JsonRpcCode.PARSE_ERROR, JsonRpcCode.INVALID_REQUEST, JsonRpcCode.INTERNAL_ERROR]).toEqual([
      -32700, -32600, -32603,
    ]);
  });
});
