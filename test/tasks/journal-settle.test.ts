import { describe, expect, it } from 'vitest';
import { settleCall } from '../../machines/tasks/journal-settle.js';

const handle = { taskId: 't1' };

describe('settleCall (machines/tasks/journal-settle.ts)', () => {
  it('a journaled call settles its entry before the SDK hears, with the ending the journal reads', () => {
    expect(settleCall('final', { journaled: true, handle: undefined, response: { result: {} } })).toEqual({
      delivery: { kind: 'answer' },
      journal: { kind: 'settle-first', ending: { kind: 'answer', outcomeUnknown: false } },
    });
    expect(
      settleCall('final', { journaled: true, handle: undefined, response: { error: { code: -32050 } } })
        .journal,
    ).toEqual({ kind: 'settle-first', ending: { kind: 'answer', outcomeUnknown: true } });
    expect(settleCall('fetch-error', { journaled: true, handle: undefined, response: undefined })).toEqual({
      delivery: { kind: 'fetch-error' },
      journal: { kind: 'settle-first', ending: { kind: 'answer', outcomeUnknown: true } },
    });
  });

  it('a task handle in the final answer is followed, and its entry settled by the follow, not before', () => {
    expect(settleCall('final', { journaled: true, handle, response: {} })).toEqual({
      delivery: { kind: 'follow', handle },
      journal: { kind: 'after-follow' },
    });
    expect(settleCall('final', { journaled: false, handle, response: {} })).toEqual({
      delivery: { kind: 'follow', handle },
      journal: { kind: 'none' },
    });
  });

  it('an abort or a raw answer wins over a handle: the call is over, so its entry settles at once', () => {
    expect(settleCall('abort', { journaled: true, handle, response: {} })).toEqual({
      delivery: { kind: 'abort' },
      journal: { kind: 'settle-first', ending: { kind: 'aborted' } },
    });
    expect(settleCall('raw-answer', { journaled: true, handle, response: {} })).toEqual({
      delivery: { kind: 'raw-answer' },
      journal: { kind: 'settle-first', ending: { kind: 'answer', outcomeUnknown: false } },
    });
  });

  it('an unjournaled call touches no journal', () => {
    expect(settleCall('final', { journaled: false, handle: undefined, response: {} }).journal).toEqual({
      kind: 'none',
    });
  });
});
