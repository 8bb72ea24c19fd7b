import {
  type Attributes,
  type Context,
  context,
  createNoopMeter,
  type Histogram,
  type MeterProvider,
  metrics,
  ProxyTracerProvider,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanStatusCode,
  type TextMapPropagator,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import { INSTRUMENTATION_SCOPE, McpAttr, McpMetric } from './names.js';

/** Where spans, metrics and the trace context go. Every field defaults to the OTel API's global one. */
export interface ContinuityTelemetryOptions {
  readonly tracerProvider?: TracerProvider;
  readonly meterProvider?: MeterProvider;
  /** Writes and reads the trace context in `params._meta` (the conventions: W3C `traceparent`, `tracestate`). */
  readonly propagator?: TextMapPropagator;
}

const VERSION = '0.1.0';

/** The conventions' advice for both duration histograms (seconds). */
const DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

/** The API's no-op tracer provider: what an unregistered global proxy delegates to. */
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate();
/** The API's no-op histogram: what a no-op meter makes. */
const NOOP_HISTOGRAM = createNoopMeter().createHistogram('noop');

/** `_meta` as a propagation carrier: plain string values only. */
type MetaCarrier = Record<string, unknown>;

const metaGetter = {
  keys: (carrier: MetaCarrier) => Object.keys(carrier),
  get: (carrier: MetaCarrier, key: string) => {
    const v = carrier[key];
    return typeof v === 'string' ? v : undefined;
  },
};

/**
 * Spans and duration metrics on OpenTelemetry's MCP semantic conventions. Only `@opentelemetry/api`: with
 * no SDK registered (and none passed) the tracer and meter are the API's no-ops, a span is a
 * non-recording span, and nothing is built for events (callers ask `span.isRecording()` first).
 */
export class ContinuityTelemetry {
  readonly tracer: Tracer;
  readonly clientDuration: Histogram;
  readonly serverDuration: Histogram;
  private readonly propagator: TextMapPropagator | undefined;
  /** The global tracer provider's proxy when no provider was passed: asked per call whether an SDK is behind it. */
  private readonly proxy: ProxyTracerProvider | undefined;
  /** A meter provider was passed or registered (histograms are made once: a later SDK is not seen). */
  private readonly metering: boolean;

  constructor(options: ContinuityTelemetryOptions = {}) {
    // The global tracer provider is a proxy: an SDK registered later is still used.
    const tracerProvider = options.tracerProvider ?? trace.getTracerProvider();
    this.tracer = tracerProvider.getTracer(INSTRUMENTATION_SCOPE, VERSION);
    this.proxy = tracerProvider instanceof ProxyTracerProvider ? tracerProvider : undefined;
    const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(
      INSTRUMENTATION_SCOPE,
      VERSION,
    );
    this.clientDuration = meter.createHistogram(McpMetric.clientOperationDuration, {
      unit: 's',
      description: 'MCP request duration as observed by the client, from the first send to its one answer',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    });
    this.serverDuration = meter.createHistogram(McpMetric.serverOperationDuration, {
      unit: 's',
      description: 'MCP request duration as observed by the server, from its execution start to its answer',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    });
    this.propagator = options.propagator;
    this.metering = this.clientDuration !== NOOP_HISTOGRAM;
  }

  /**
   * Whether a call can leave a trace: a tracer or meter provider is passed or registered, or a propagator
   * is passed or registered. When none is, every span would be a no-op and `_meta` unchanged, so callers
   * skip the per-call work (issue 25, row 2). Asked per call: an SDK registered later is seen.
   */
  observing(): boolean {
    return (
      this.metering ||
      this.propagator !== undefined ||
      this.proxy === undefined ||
      this.proxy.getDelegate() !== NOOP_TRACER_PROVIDER ||
      propagation.fields().length > 0
    );
  }

  /**
   * The trace context of `ctx` as `_meta` entries (`traceparent`, `tracestate` with the W3C propagator),
   * or `undefined` when the propagator writes nothing (no SDK, no propagator: the request is unchanged).
   */
  metaFor(ctx: Context): Record<string, string> | undefined {
    const carrier: Record<string, string> = {};
    if (this.propagator) this.propagator.inject(ctx, carrier, defaultSetter);
    else propagation.inject(ctx, carrier);
    for (const _ in carrier) return carrier;
    return undefined;
  }

  /** The context a request's `_meta` carries (the client's span), or the root context when none. */
  contextOf(meta: unknown): Context {
    if (typeof meta !== 'object' || meta === null) return ROOT_CONTEXT;
    const carrier = meta as MetaCarrier;
    return this.propagator
      ? this.propagator.extract(ROOT_CONTEXT, carrier, metaGetter)
      : propagation.extract(ROOT_CONTEXT, carrier, metaGetter);
  }
}

const defaultSetter = {
  set: (carrier: Record<string, string>, key: string, value: string) => {
    carrier[key] = value;
  },
};

/** Attributes with their `undefined` values dropped (an attribute is set, or absent). */
export function withoutUndefined(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) if (v !== undefined) out[k] = v;
  return out;
}

let shared: ContinuityTelemetry | undefined;

/** The telemetry on the OTel API's globals, made once (on first use: after an SDK registered at startup). */
export function globalTelemetry(): ContinuityTelemetry {
  shared ??= new ContinuityTelemetry();
  return shared;
}

/** The active context (the application's span, when its SDK has a context manager). */
export const activeContext = (): Context => context.active();

/**
 * Ends an operation's span: its duration (seconds, from `startedAt`, a `performance.now()`) goes to
 * `histogram` with `attributes` and the outcome's `error.type`; the outcome is set on the span, whose
 * status is an error when there is one.
 */
export function endOperation(
  histogram: Histogram,
  span: Span,
  startedAt: number,
  attributes: Attributes,
  outcome: { readonly errorType?: string; readonly statusCode?: string },
): void {
  histogram.record(
    (performance.now() - startedAt) / 1000,
    withoutUndefined({ ...attributes, [McpAttr.errorType]: outcome.errorType }),
  );
  if (span.isRecording()) {
    span.setAttributes(
      withoutUndefined({
        [McpAttr.errorType]: outcome.errorType,
        [McpAttr.responseStatusCode]: outcome.statusCode,
      }),
    );
    if (outcome.errorType !== undefined) span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}
