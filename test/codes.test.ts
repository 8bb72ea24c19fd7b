import { describe, expect, it } from 'vitest';
import {
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
