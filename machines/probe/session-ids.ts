/**
 * What a handful of session ids say about how they were made. Pure. A black box cannot measure
 * randomness; it can catch what is plainly not random (repeats, counters, short ids) and bound the rest
 * from the alphabet and the length of the part that varies.
 */

export interface SessionIdAssessment {
  /** Every id is 1+ characters in 0x21-0x7E (the spec's MUST). */
  readonly visibleAscii: boolean;
  readonly distinct: boolean;
  /** Ids that read as numbers a small step apart (a counter). */
  readonly sequential: boolean;
  /** An upper estimate of the random bits per id: 122 for UUIDv4; else varying length x bits per character. */
  readonly estimatedBits: number;
  /** How the estimate was made, for the report. */
  readonly basis: string;
}

const VISIBLE = /^[\x21-\x7e]+$/;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Below this, guessing a live session id is within reach of a patient attacker. */
export const MIN_SESSION_ID_BITS = 64;

/** The smallest alphabet that spells every sample, and its bits per character. */
function alphabet(ids: readonly string[]): { name: string; bits: number } {
  const all = ids.join('');
  if (/^[0-9]*$/.test(all)) return { name: 'decimal', bits: Math.log2(10) };
  if (/^[0-9a-f-]*$/.test(all) || /^[0-9A-F-]*$/.test(all)) return { name: 'hex', bits: 4 };
  if (/^[0-9A-Za-z_-]*$/.test(all)) return { name: 'base64url', bits: 6 };
  return { name: 'visible ASCII', bits: Math.log2(94) };
}

function commonPrefix(ids: readonly string[]): number {
  const first = ids[0] ?? '';
  let n = 0;
  while (n < first.length && ids.every((id) => id[n] === first[n])) n++;
  return n;
}

function commonSuffix(ids: readonly string[]): number {
  const reversed = ids.map((id) => [...id].reverse().join(''));
  return commonPrefix(reversed);
}

/** `ids`: two or more ids from separate `initialize` requests. */
export function assessSessionIds(ids: readonly string[]): SessionIdAssessment {
  const visibleAscii = ids.every((id) => VISIBLE.test(id));
  const distinct = new Set(ids).size === ids.length;
  const numbers = ids.map((id) => (/^\d{1,15}$/.test(id) ? Number(id) : Number.NaN));
  const sequential =
    ids.length > 1 &&
    numbers.every((n) => Number.isFinite(n)) &&
    numbers.slice(1).every((n, i) => Math.abs(n - (numbers[i] as number)) < 1_000_000);
  if (!distinct || sequential || ids.length < 2)
    return { visibleAscii, distinct, sequential, estimatedBits: 0, basis: 'repeated or counted ids' };
  if (ids.every((id) => UUID_V4.test(id)))
    return { visibleAscii, distinct, sequential, estimatedBits: 122, basis: 'UUIDv4 (122 random bits)' };
  const shortest = Math.min(...ids.map((id) => id.length));
  const fixed = Math.min(shortest, commonPrefix(ids) + commonSuffix(ids));
  const varying = shortest - fixed;
  const { name, bits } = alphabet(ids);
  const estimatedBits = Math.floor(varying * bits);
  return {
    visibleAscii,
    distinct,
    sequential,
    estimatedBits,
    basis: `${varying} varying ${name} characters (at most ${estimatedBits} bits)`,
  };
}
