import { type Attributes, type Counter, type Histogram, type Meter, metrics } from '@opentelemetry/api';
import type { MetricSpec } from './names.js';
import { type Figures, Tally } from './tally.js';

/** Reported as the meter's version. `test/metrics` checks it against package.json. */
export const METER_VERSION = '0.1.0';
export const METER_NAME = 'mcp-continuity';

/**
 * Writes each observation twice: to an OTel instrument (a no-op unless an SDK MeterProvider is
 * registered, or a meter is passed) and to the in-process {@link Tally}. Instruments are created on
 * first use, from the spec table, so nothing is registered for metrics a process never records.
 */
export class Recorder {
  readonly tally = new Tally();
  private readonly meter: Meter;
  private readonly counters = new Map<string, Counter>();
  private readonly histograms = new Map<string, Histogram>();

  constructor(
    meter: Meter | undefined,
    /** Added to every data point, e.g. `{ 'service.instance.id': … }` to tell servers apart. */
    private readonly attributes: Attributes = {},
  ) {
    // Without a registered provider this is the API's no-op meter: nothing is recorded, nothing throws.
    this.meter = meter ?? metrics.getMeter(METER_NAME, METER_VERSION);
  }

  declare(spec: MetricSpec): void {
    if (spec.kind === 'counter') this.tally.declareCounter(spec.name);
    else if (spec.kind === 'histogram') this.tally.declareHistogram(spec.name);
  }

  /** Adds `n` to a counter; `attributes.reason`, when present, also gets its own figure. */
  add(spec: MetricSpec, n: number, attributes: Attributes = {}): void {
    if (!(n > 0)) return;
    const reason = attributes.reason;
    this.tally.add(spec.name, n, reason === undefined ? undefined : String(reason));
    this.counterOf(spec).add(n, { ...this.attributes, ...attributes });
  }

  record(spec: MetricSpec, value: number, attributes: Attributes = {}): void {
    if (!Number.isFinite(value)) return;
    this.tally.record(spec.name, value);
    this.histogramOf(spec).record(value, { ...this.attributes, ...attributes });
  }

  /** An observable gauge read at each collection; undefined or a non-finite value is not reported. */
  gauge(spec: MetricSpec, read: () => number | undefined): void {
    const finite = () => {
      const v = read();
      return v !== undefined && Number.isFinite(v) ? v : undefined;
    };
    this.tally.gauge(spec.name, finite);
    const g = this.meter.createObservableGauge(spec.name, { unit: spec.unit, description: spec.description });
    g.addCallback((result) => {
      const v = finite();
      if (v !== undefined) result.observe(v, this.attributes);
    });
  }

  figures(): Figures {
    return this.tally.figures();
  }

  private counterOf(spec: MetricSpec): Counter {
    return instrument(this.counters, spec, () =>
      this.meter.createCounter(spec.name, { unit: spec.unit, description: spec.description }),
    );
  }

  private histogramOf(spec: MetricSpec): Histogram {
    return instrument(this.histograms, spec, () =>
      this.meter.createHistogram(spec.name, {
        unit: spec.unit,
        description: spec.description,
        ...(spec.buckets ? { advice: { explicitBucketBoundaries: [...spec.buckets] } } : {}),
      }),
    );
  }
}

/** One instrument per metric name, created on first use. */
function instrument<T>(made: Map<string, T>, spec: MetricSpec, create: () => T): T {
  let i = made.get(spec.name);
  if (!i) {
    i = create();
    made.set(spec.name, i);
  }
  return i;
}
