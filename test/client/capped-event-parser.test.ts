import { describe, expect, it } from 'vitest';
import { cappedEventParser } from '../../src/client/read-capped.js';

describe('cappedEventParser (both eras read event streams with it)', () => {
  it('delivers events within the cap, and answers over-cap once one event passes it', () => {
    const seen: string[] = [];
    const parser = cappedEventParser(64, { onEvent: (e) => seen.push(e.data) });
    expect(parser.feed('id: 1\ndata: small\n\n')).toBe('ok');
    expect(seen).toEqual(['small']);
    // Fed in pieces: no piece is over the cap, the event they make is.
    expect(parser.feed(`data: ${'x'.repeat(40)}`)).toBe('ok');
    expect(parser.feed('x'.repeat(40))).toBe('over-cap');
    expect(seen).toEqual(['small']);
  });

  it('many small events add up to more than the cap without passing it', () => {
    const seen: string[] = [];
    const parser = cappedEventParser(64, { onEvent: (e) => seen.push(e.data) });
    for (let i = 0; i < 20; i++) expect(parser.feed(`data: event ${i}\n\n`)).toBe('ok');
    expect(seen).toHaveLength(20);
  });
});
