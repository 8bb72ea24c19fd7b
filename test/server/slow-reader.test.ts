import { describe, expect, it } from 'vitest';
import { afterEnd, writeVerdict } from '../../machines/server/slow-reader.js';

describe('the slow-reader cut (machines/server/slow-reader.ts)', () => {
  it('cuts only once the unsent bytes exceed the bound: at the bound the reader is still reading', () => {
    expect(writeVerdict(0, 100)).toBe('go-on');
    expect(writeVerdict(100, 100)).toBe('go-on');
    expect(writeVerdict(101, 100)).toBe('cut');
    // One frame larger than the bound was written whole; the cut comes after it, not instead of it.
    expect(writeVerdict(5_000, 100)).toBe('cut');
  });

  it('after the end, only a cut reader with bytes still unsent is given the stall time to drain', () => {
    expect(afterEnd(false, 0, 60_000)).toEqual({ kind: 'done' });
    // An uncut reader is never destroyed for being behind: it is merely slow.
    expect(afterEnd(false, 1_000_000, 60_000)).toEqual({ kind: 'done' });
    expect(afterEnd(true, 0, 60_000)).toEqual({ kind: 'done' });
    expect(afterEnd(true, 1, 250)).toEqual({ kind: 'drain-or-destroy', withinMs: 250 });
  });
});
