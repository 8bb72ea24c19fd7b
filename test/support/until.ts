/**
 * Polls `probe` every 10 ms until it gives a value (not `undefined` or `false`), for at most `ms` and
 * 10,000 polls; throws naming `what` when it never does. Every wait in a test is bounded by this.
 */
export async function until<T>(what: string, probe: () => T | undefined | false, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (let i = 0; Date.now() < deadline && i < 10_000; i++) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}
