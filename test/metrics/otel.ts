import type { Attributes } from '@opentelemetry/api';
import { DataPointType, MeterProvider, type MetricData, MetricReader } from '@opentelemetry/sdk-metrics';

/** A reader the test pulls from (`collect()`), like a Prometheus scrape; nothing is exported anywhere. */
class PullReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const matches = (have: Attributes, want: Attributes) => Object.entries(want).every(([k, v]) => have[k] === v);

/** What one collection saw, by instrument name. */
export class Collected {
  constructor(private readonly metrics: MetricData[]) {}

  descriptor(name: string) {
    return this.metrics.find((m) => m.descriptor.name === name)?.descriptor;
  }

  /** A counter's value, summed over the data points whose attributes include `attributes`. */
  sum(name: string, attributes: Attributes = {}): number {
    let total = 0;
    for (const m of this.metrics) {
      if (m.descriptor.name !== name || m.dataPointType !== DataPointType.SUM) continue;
      for (const p of m.dataPoints) if (matches(p.attributes, attributes)) total += p.value as number;
    }
    return total;
  }

  /** A histogram's points, summed over the data points whose attributes include `attributes`. */
  histogram(name: string, attributes: Attributes = {}): { count: number; sum: number; max: number } {
    const out = { count: 0, sum: 0, max: 0 };
    for (const m of this.metrics) {
      if (m.descriptor.name !== name || m.dataPointType !== DataPointType.HISTOGRAM) continue;
      for (const p of m.dataPoints) {
        if (!matches(p.attributes, attributes)) continue;
        out.count += p.value.count;
        out.sum += p.value.sum ?? 0;
        out.max = Math.max(out.max, p.value.max ?? 0);
      }
    }
    return out;
  }

  gauge(name: string): number | undefined {
    for (const m of this.metrics) {
      if (m.descriptor.name !== name || m.dataPointType !== DataPointType.GAUGE) continue;
      return m.dataPoints[0]?.value as number | undefined;
    }
    return undefined;
  }
}

/** An OTel SDK MeterProvider, local to the test (never registered globally). */
export function otelSdk() {
  const reader = new PullReader();
  const provider = new MeterProvider({ readers: [reader] });
  return {
    provider,
    meter: provider.getMeter('mcp-continuity-test'),
    async collect(): Promise<Collected> {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new Error(`collection failed: ${String(errors[0])}`);
      return new Collected(resourceMetrics.scopeMetrics.flatMap((s) => s.metrics));
    },
    shutdown: () => provider.shutdown(),
  };
}

/** Polls `done` until it holds or `ms` pass (bounded: a metric that never moves fails the test). */
export async function eventually(done: () => boolean, ms = 5_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
