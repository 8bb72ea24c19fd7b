import type { Attributes, Meter } from '@opentelemetry/api';
import { ClientMetrics } from './client.js';
import { Recorder } from './recorder.js';
import { ServerMetrics } from './server.js';
import type { Figures } from './tally.js';

export interface ContinuityMetricsOptions {
  /**
   * Where the OTel instruments are created. Default: `metrics.getMeter('mcp-continuity', version)` from
   * `@opentelemetry/api`, which records nothing until an SDK `MeterProvider` is registered. The API
   * hands out a no-op meter when none is registered yet, so register the SDK before creating this.
   */
  readonly meter?: Meter;
  /** Added to every data point, e.g. `{ 'service.instance.id': 'a' }` to tell servers apart. */
  readonly attributes?: Attributes;
  /** The clock latencies are measured with. Default `performance.now`. */
  readonly now?: () => number;
}

/**
 * The continuity figures of a server, a client transport, or both: resumes, 410s and lost events,
 * evictions, ended sessions, outcome-unknown calls, gaps, reconnects and the retention margin. Pass one
 * as `metrics` to `createContinuityServer` and/or `ContinuityClientTransport`. Every observation goes to
 * OTel instruments and to a plain tally, read with {@link ContinuityMetrics.figures}, which works with no
 * SDK installed. docs/operations.md's "Metrics" section lists each metric and when it moves.
 *
 * One instance per server: the retention margin is taken against the shortest retention window of the
 * servers it observes, with the worst latency of them all.
 */
export class ContinuityMetrics {
  readonly server: ServerMetrics;
  readonly client: ClientMetrics;
  private readonly recorder: Recorder;

  constructor(options: ContinuityMetricsOptions = {}) {
    const now = options.now ?? (() => performance.now());
    this.recorder = new Recorder(options.meter, options.attributes);
    this.server = new ServerMetrics(this.recorder, now);
    this.client = new ClientMetrics(this.recorder, now);
  }

  /**
   * Every figure so far, flat: counter name → total, `name{reason=…}` → the share of one reason,
   * `histogram.count` / `.sum` / `.max`, gauge name → current value. Counters of a side in use (server
   * or client) are present from the start, at 0.
   */
  figures(): Figures {
    return this.recorder.figures();
  }
}
