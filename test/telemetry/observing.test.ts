import { trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import type { JsonRpcMessage } from '../../machines/jsonrpc.js';
import { requestServerTrace } from '../../src/telemetry/request-server-trace.js';
import { SessionCallTraces } from '../../src/telemetry/session-call-traces.js';
import { ContinuityTelemetry } from '../../src/telemetry/telemetry.js';

const call = (id: number): JsonRpcMessage =>
  ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo' } }) as JsonRpcMessage;

// Issue 25 row 2: with nothing configured a call does no trace work, and an SDK registered later is seen.
describe('telemetry with nothing configured', () => {
  afterEach(() => trace.disable());

  it('leaves requests unchanged until a global tracer provider is registered', () => {
    const telemetry = new ContinuityTelemetry();
    const traces = new SessionCallTraces(telemetry);
    expect(telemetry.observing()).toBe(false);
    const first = call(1);
    expect(traces.sent(first, 's', '2025-06-18')).toBe(first);

    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    expect(telemetry.observing()).toBe(true);
    traces.sent(call(2), 's', '2025-06-18');
    traces.delivered({ jsonrpc: '2.0', id: 2, result: {} } as JsonRpcMessage);
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['tools/call echo']);
  });

  it('gives a 2026-07-28 request no server trace until something observes', () => {
    expect(requestServerTrace(new ContinuityTelemetry(), call(1))).toBeUndefined();
    const telemetry = new ContinuityTelemetry({ tracerProvider: new BasicTracerProvider() });
    expect(requestServerTrace(telemetry, call(1))).toBeDefined();
  });

  it('observes when a tracer provider or a propagator is passed', () => {
    expect(new ContinuityTelemetry({ tracerProvider: new BasicTracerProvider() }).observing()).toBe(true);
    expect(new ContinuityTelemetry({ propagator: new W3CTraceContextPropagator() }).observing()).toBe(true);
  });
});
