import { describe, expect, it } from 'vitest';
import { DELIVERY_CHECKS, type DeliveryTrace, type StreamDelivery } from './delivery.js';

/** Each delivery check fails on a hand-built record of the wrong behaviour and holds on the right one. */
const stream = (over: Partial<StreamDelivery> = {}): StreamDelivery => ({
  label: 's1/1',
  delivered: [1, 2, 3],
  sent: [1, 2, 3],
  flagged: 0,
  sizelessLoss: false,
  ...over,
});

const record = (over: Partial<DeliveryTrace> = {}): DeliveryTrace => ({
  streams: [],
  lossReports: [],
  leaves: [],
  progress: [],
  ...over,
});

describe('no duplicate delivery', () => {
  const check = DELIVERY_CHECKS['no duplicate delivery'];

  it('flags a message delivered twice, and messages out of order', () => {
    const t = record({
      streams: [stream({ delivered: [1, 2, 2] }), stream({ label: 's1/2', delivered: [2, 1] })],
    });
    expect(check(t)).toEqual([
      's1/1: 2 delivered 2 times',
      expect.stringMatching(/^s1\/2: delivered out of order/),
    ]);
  });

  it('holds on each message once, in order', () => {
    expect(check(record({ streams: [stream()] }))).toEqual([]);
  });
});

describe('no unflagged loss', () => {
  const check = DELIVERY_CHECKS['no unflagged loss'];

  it('flags a silent loss, an over-reported one, and a session reported lost that the server still had', () => {
    const t = record({
      streams: [stream({ delivered: [1] }), stream({ label: 's1/2', delivered: [1, 2], flagged: 2 })],
      lossReports: [{ label: 'n:3: session s1', serverStillHad: true }],
    });
    expect(check(t)).toEqual([
      's1/1: 2 undelivered [2,3] but gaps flagged 0',
      's1/2: 1 undelivered [3] but gaps flagged 2 (over-reported)',
      'n:3: session s1: reported lost while the server still had it',
    ]);
  });

  it('holds on an exact gap, a loss of unknown size, an excused message, and a stream not judged', () => {
    const t = record({
      streams: [
        stream({ delivered: [1], flagged: 2 }),
        stream({ delivered: [], sizelessLoss: true }),
        stream({ delivered: [1, 2], excused: new Set([3]) }),
        stream({ delivered: [5], sent: undefined }),
      ],
      lossReports: [{ label: 'n:3: session s1', serverStillHad: false }],
    });
    expect(check(t)).toEqual([]);
  });
});

describe('session survives transport', () => {
  const check = DELIVERY_CHECKS['session survives transport'];

  it('flags leaving a live session, and more new sessions than the restarts explain', () => {
    const t = record({
      leaves: [{ label: 'p1 left s1', serverStillHad: true }],
      sessionsAdopted: { adopted: 3, allowed: 2, why: 'one server restart' },
    });
    expect(check(t)).toEqual([
      'p1 left s1 while the server still had it',
      '3 sessions adopted, but only 2 allowed (one server restart)',
    ]);
  });

  it('holds on leaving a session the server lost', () => {
    const t = record({
      leaves: [{ label: 'p1 left s1', serverStillHad: false }],
      sessionsAdopted: { adopted: 2, allowed: 2, why: 'one server restart' },
    });
    expect(check(t)).toEqual([]);
  });
});

describe('no misdelivery', () => {
  const check = DELIVERY_CHECKS['no misdelivery'];

  it("flags another call's progress in a call's handler", () => {
    const t = record({
      progress: [
        { receiver: 'c3', sentFor: 'c1', n: 4 },
        { receiver: 'c3', sentFor: 'c1', n: 5 },
        { receiver: 'c3', sentFor: 'c3', n: 1 },
      ],
    });
    expect(check(t)).toEqual(['c3 received progress sent for c1: 4,5']);
  });
});
