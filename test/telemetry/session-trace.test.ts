import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { ContinuityClientTransport } from '../../src/client/transport.js';
import { ContinuityMetrics } from '../../src/metrics/index.js';
import { createContinuityServer } from '../../src/server/handler.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { ContinuityEvent, McpAttr, McpMetric } from '../../src/telemetry/names.js';
import { ContinuityTelemetry } from '../../src/telemetry/telemetry.js';
import { eventually, otelSdk } from '../metrics/otel.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';

/**
 * The 2025-era transport on the conventions: one CLIENT span per request (its session id, its method and
 * tool), the span's W3C trace context in the request's `params._meta` as the server received it, one span
 * across a cut and resume of the call's stream, and the client duration metric; on the server, one
 * SERVER span per request, the client span's child, and the server duration metric.
 */
describe('2025-11-25 client and server spans', () => {
  it('a tools/call resumed after a cut is one CLIENT span, its context in params._meta', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const sdkMetrics = otelSdk();
    const telemetry = new ContinuityTelemetry({
      tracerProvider,
      meterProvider: sdkMetrics.provider,
      propagator: new W3CTraceContextPropagator(),
    });
    const clientMetrics = new ContinuityMetrics();
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer({ effects: new Map(), servers: [] }),
      eventLog: new MemoryEventLog(),
      heartbeatMs: 0,
      retryMs: 20,
      onError: () => undefined,
      telemetry,
    });
    const server = http.createServer(continuity.nodeHandler);
    const traceparents: string[] = [];
    server.on('request', (req: http.IncomingMessage) => {
      let body = '';
      req.on('data', (c: Buffer) => {
        body += c.toString('utf8');
      });
      req.on('end', () => {
        const m = /"traceparent":"([^"]+)"/.exec(body);
        if (body.includes('"tools/call"') && m?.[1]) traceparents.push(m[1]);
      });
    });
    const url = new URL(`http://127.0.0.1:${await listenOnLoopback(server)}/mcp`);
    const transport = new ContinuityClientTransport(url, {
      reconnect: { initialDelayMs: 20, maxDelayMs: 100, jitter: 'none' },
      telemetry,
      metrics: clientMetrics,
    });
    const client = new Client({ name: 'trace', version: '1.0.0' });
    let sessionId: string | undefined;
    try {
      await client.connect(transport);
      sessionId = transport.sessionId;
      const call = client.callTool({ name: 'slow', arguments: { ms: 400 } });
      await new Promise((r) => setTimeout(r, 100));
      server.closeAllConnections(); // the call's stream is cut; the transport resumes it
      await call;
    } finally {
      await client.close();
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
    // The cut really happened: the call's stream was resumed.
    expect(clientMetrics.figures()['mcp_continuity.client.reconnect_attempts']).toBeGreaterThanOrEqual(1);
    const spans = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CLIENT);
    const calls = spans.filter((s) => s.attributes[McpAttr.methodName] === 'tools/call');
    expect(calls).toHaveLength(1);
    const [span] = calls;
    expect(span?.name).toBe('tools/call slow');
    expect(span?.attributes[McpAttr.toolName]).toBe('slow');
    expect(span?.attributes[McpAttr.sessionId]).toBe(sessionId);
    expect(span?.attributes[McpAttr.requestId]).toBeDefined();
    expect(span?.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(span?.events.filter((e) => e.name === ContinuityEvent.gap)).toHaveLength(0);
    expect(spans.some((s) => s.name === 'initialize')).toBe(true);
    // The server received the call span's own context (W3C: 00-traceId-spanId-flags).
    const ctx = span?.spanContext();
    expect(traceparents).toContain(`00-${ctx?.traceId}-${ctx?.spanId}-01`);
    // The server's one SERVER span for the call: the client span's child, across the cut and resume.
    const served = exporter
      .getFinishedSpans()
      .filter((s) => s.kind === SpanKind.SERVER && s.attributes[McpAttr.methodName] === 'tools/call');
    expect(served).toHaveLength(1);
    const [serverSpan] = served;
    expect(serverSpan?.name).toBe('tools/call slow');
    expect(serverSpan?.attributes[McpAttr.toolName]).toBe('slow');
    expect(serverSpan?.attributes[McpAttr.sessionId]).toBe(sessionId);
    expect(serverSpan?.attributes[McpAttr.protocolVersion]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(serverSpan?.attributes[McpAttr.requestId]).toBe(span?.attributes[McpAttr.requestId]);
    expect(serverSpan?.attributes[McpAttr.errorType]).toBeUndefined();
    expect(serverSpan?.spanContext().traceId).toBe(ctx?.traceId);
    expect(serverSpan?.parentSpanContext?.spanId).toBe(ctx?.spanId);
    const collected = await sdkMetrics.collect();
    expect(collected.histogram(McpMetric.clientOperationDuration).count).toBeGreaterThanOrEqual(2);
    const serverCall = collected.histogram(McpMetric.serverOperationDuration, {
      'mcp.method.name': 'tools/call',
    });
    expect(serverCall.count).toBe(1);
    expect(serverCall.sum).toBeGreaterThanOrEqual(0.39);
    await tracerProvider.shutdown();
    await sdkMetrics.shutdown();
  }, 60_000);

  it("a request the application gives up on (the SDK's timeout) ends its span at once, not at close", async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const telemetry = new ContinuityTelemetry({
      tracerProvider,
      propagator: new W3CTraceContextPropagator(),
    });
    const continuity = createContinuityServer({
      createMcpServer: () => demoMcpServer({ effects: new Map(), servers: [] }),
      eventLog: new MemoryEventLog(),
      heartbeatMs: 0,
      onError: () => undefined,
      telemetry,
    });
    const server = http.createServer(continuity.nodeHandler);
    const url = new URL(`http://127.0.0.1:${await listenOnLoopback(server)}/mcp`);
    const transport = new ContinuityClientTransport(url, { telemetry });
    const client = new Client({ name: 'trace-timeout', version: '1.0.0' });
    try {
      await client.connect(transport);
      await expect(
        client.callTool({ name: 'slow', arguments: { ms: 5_000 } }, undefined, { timeout: 100 }),
      ).rejects.toThrow();
      // Still connected: the span ended because the SDK sent notifications/cancelled for the call.
      const calls = exporter
        .getFinishedSpans()
        .filter((s) => s.kind === SpanKind.CLIENT && s.attributes[McpAttr.methodName] === 'tools/call');
      expect(calls).toHaveLength(1);
      expect(calls[0]?.attributes[McpAttr.errorType]).toBe('cancelled');
      // The server's span ends too, when the cancellation reaches it (the SDK server sends no answer).
      const served = () =>
        exporter
          .getFinishedSpans()
          .filter((s) => s.kind === SpanKind.SERVER && s.attributes[McpAttr.methodName] === 'tools/call');
      await eventually(() => served().length === 1, 5_000, 'the server span');
      expect(served()[0]?.attributes[McpAttr.errorType]).toBe('cancelled');
      expect(served()[0]?.spanContext().traceId).toBe(calls[0]?.spanContext().traceId);
    } finally {
      await client.close();
      await continuity.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await tracerProvider.shutdown();
    }
  }, 60_000);
});
