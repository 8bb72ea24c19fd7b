import { describe, expect, it } from 'vitest';
import { LatestWrite } from '../../src/client/latest-write.js';

describe('LatestWrite: one write at a time, the last value wins', () => {
  it('a burst in one tick is one write of the newest value; values pushed during a write make one more', async () => {
    const written: number[] = [];
    let release: () => void = () => undefined;
    let active = 0;
    let mostActive = 0;
    const w = new LatestWrite<number>(async (v) => {
      active++;
      mostActive = Math.max(mostActive, active);
      written.push(v);
      if (v === 3) await new Promise<void>((r) => (release = r));
      active--;
    });
    const first = [1, 2, 3].map((v) => w.push(v));
    await new Promise((r) => setImmediate(r));
    expect(written).toEqual([3]);
    const later = [4, 5, 6].map((v) => w.push(v));
    release();
    await Promise.all([...first, ...later]);
    expect(written).toEqual([3, 6]);
    expect(mostActive).toBe(1);
  });

  it('a failed write rejects its pushes; the next push writes again', async () => {
    const written: string[] = [];
    const w = new LatestWrite<string>(async (v) => {
      if (v === 'bad') throw new Error('disk full');
      written.push(v);
    });
    await expect(w.push('bad')).rejects.toThrow(/disk full/);
    await w.push('good');
    expect(written).toEqual(['good']);
  });
});
