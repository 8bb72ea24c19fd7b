/**
 * A small seeded generator (mulberry32): what tests, the fault proxy and the simulated worlds draw, so a
 * run is named by its seed and replays exactly. Not for anything that must be unpredictable (keys, ids).
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
