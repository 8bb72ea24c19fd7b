import { describe, expect, it } from 'vitest';
import { brokenEnd, exchangeDeadlineMs } from '../../machines/probe/schedule.js';

describe("the probe's deadlines (machines/probe/schedule.ts)", () => {
  const o = { timeoutMs: 5_000, streamWaitMs: 1_500, cutAfterMs: 300 };

  it('a request runs to --timeout; a stream wait and a cut end sooner when asked', () => {
    expect(exchangeDeadlineMs(o, 'request')).toBe(5_000);
    expect(exchangeDeadlineMs(o, 'stream')).toBe(1_500);
    expect(exchangeDeadlineMs(o, 'cut')).toBe(300);
  });

  it('--timeout bounds every exchange: a longer stream wait or cut is shortened to it', () => {
    const short = { timeoutMs: 200, streamWaitMs: 1_500, cutAfterMs: 300 };
    for (const kind of ['request', 'stream', 'cut'] as const)
      expect(exchangeDeadlineMs(short, kind)).toBe(200);
  });

  it('an exchange that broke off past its deadline was the probe (a timeout), before it the network', () => {
    expect(brokenEnd(true)).toBe('timeout');
    expect(brokenEnd(false)).toBe('network');
  });
});
