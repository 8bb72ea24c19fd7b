import { describe, expect, it } from 'vitest';
import {
  JsonRpcCode,
  OutcomeUnknownReason,
  ReconnectReason,
  ResumeRejection,
  StopReason,
} from '../machines/codes.js';

describe('codes are tabled once and never collide', () => {
  it.each([
    ['JsonRpcCode', JsonRpcCode],
    ['OutcomeUnknownReason', OutcomeUnknownReason],
    ['ResumeRejection', ResumeRejection],
    ['ReconnectReason', ReconnectReason],
    ['StopReason', StopReason],
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
});
