/** Small helpers for timing, statistics, heap measurement and formatting. */

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  // Nearest rank: p99 of 30 samples is the largest one, never an interpolation below it.
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export function summarize(samples: readonly number[]): {
  median: number;
  p99: number;
  min: number;
  max: number;
} {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    median: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

export function median(samples: readonly number[]): number {
  return summarize(samples).median;
}

/** Runs `gc()` a few times (needs --expose-gc) with turns of the event loop between, so finalizers run. */
export async function settledHeap(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run node with --expose-gc');
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  gc();
  return process.memoryUsage().heapUsed;
}

/** Integer with thin-space thousands separators, for tables. */
export function int(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  return Math.round(n)
    .toString()
    .replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

export function fixed(n: number, digits = 1): string {
  return Number.isFinite(n) ? n.toFixed(digits) : String(n);
}

export function bytes(n: number): string {
  if (Math.abs(n) >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  if (Math.abs(n) >= 1024) return `${(n / 1024).toFixed(2)} KiB`;
  return `${Math.round(n)} B`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves with `p`, or rejects after `ms` with `what` in the message: every wait in the bench is bounded. */
export function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      timer.unref();
    }),
  ]);
}

/** Runs `task` over `total` items with `concurrency` workers pulling from a shared counter. */
export async function pool(
  total: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
}
