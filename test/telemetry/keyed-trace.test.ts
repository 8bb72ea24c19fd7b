import { createServer, type Server as HttpServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer } from '@modelcontextprotocol/server';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_CONTINUITY_SETTINGS } from '../../machines/continuity-extension.js';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { ContinuityMetrics } from '../../src/metrics/index.js';
import { type ContinuityServer, createContinuityServer } from '../../src/server/handler.js';
import { createKeyedRequests } from '../../src/server/keyed/index.js';
import { MemoryEventLog } from '../../src/server/memory-event-log.js';
import { MemoryMemoStore } from '../../src/server/memory-memo-store.js';
import { ContinuityEvent, McpAttr, McpMetric } from '../../src/telemetry/names.js';
import { ContinuityTelemetry } from '../../src/telemetry/telemetry.js';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { eventually, otelSdk } from '../metrics/otel.js';
import { demoMcpServer } from '../server/harness.js';
import { listenOnLoopback } from '../support/listen.js';
import { cutTwiceThenRelease, onToolCall } from './cut-twice.js';

/**
 * Issue 28's "done when": a keyed 2026-07-28 call cut twice, exported through the OTel SDK's in-memory
 * exporter, is one trace: the client's CLIENT span with its three attempts, and exactly one SERVER span
 * for the one execution, joined by trace id, on the MCP conventions' names. Real HTTP on 127.0.0.1: the
 * official v2 client with `continuityFetch`, a fault proxy that resets connections on the test's cue, the
 * official v2 server behind `createContinuityServer` with the continuity extension.
 */

const MODERN = '2026-07-28';

let release: () => void = () => undefined;
let charges = 0;
let started = 0;
let toolCalls = 0;

function modernServer(): McpServer {
  const server = new McpServer({ name: 'trace', version: '1.0.0' });
  server.registerTool('charge', { inputSchema: z.object({ cents: z.number() }) }, async ({ cents }) => {
    started++;
    // Runs until the test has cut the call twice; ignores every abort (a side effect does not stop).
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    charges++;
    return { content: [{ type: 'text', text: `charged ${cents}` }] };
  });
  return server;
}

let continuity: ContinuityServer;
let http: HttpServer;
let proxy: FaultProxy;
let exporter: InMemorySpanExporter;
let tracerProvider: BasicTracerProvider;
let sdkMetrics: ReturnType<typeof otelSdk>;
let telemetry: ContinuityTelemetry;
let serverFigures: ContinuityMetrics;

beforeEach(async () => {
  charges = 0;
  started = 0;
  toolCalls = 0;
  exporter = new InMemorySpanExporter();
  tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  sdkMetrics = otelSdk();
  serverFigures = new ContinuityMetrics();
  // Local to the test: nothing is registered globally.
  telemetry = new ContinuityTelemetry({
    tracerProvider,
    meterProvider: sdkMetrics.provider,
    propagator: new W3CTraceContextPropagator(),
  });
  continuity = createContinuityServer({
    createMcpServer: () => demoMcpServer({ effects: new Map(), servers: [] }),
    heartbeatMs: 0,
    // Unkeyed requests' SERVER spans (server/discover, an unkeyed call) go to the test's provider too.
    telemetry,
    modern: {
      createServer: modernServer,
      keepAliveMs: 0,
      keyed: createKeyedRequests({
        log: new MemoryEventLog(),
        memo: new MemoryMemoStore({ memoWindowMs: DEFAULT_CONTINUITY_SETTINGS.memoWindowMs }),
        keepAliveMs: 0,
        telemetry,
        metrics: serverFigures,
      }),
    },
  });
  http = createServer(continuity.nodeHandler);
  // Counts the attempts of the call that reach the server (the body names the method).
  onToolCall(http, () => toolCalls++);
  const port = await listenOnLoopback(http);
  proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
});

afterEach(async () => {
  release();
  await proxy.close();
  await continuity.close();
  http.closeAllConnections();
  await new Promise((r) => http.close(r));
  await tracerProvider.shutdown();
  await sdkMetrics.shutdown();
});

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const events = (span: ReadableSpan, name: string) => span.events.filter((e) => e.name === name);

describe('traces on the MCP conventions', () => {
  it('a keyed call cut twice: one client span, three attempts, one server execution, one trace id', async () => {
    const client = new Client(
      { name: 'trace', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } },
    );
    const figures = new ContinuityMetrics();
    // Every request body as sent, attempts included: each must carry the call span's trace context.
    const bodies: string[] = [];
    const spy: typeof fetch = (input, init) => {
      if (typeof init?.body === 'string') bodies.push(init.body);
      return fetch(input, init);
    };
    await client.connect(
      new StreamableHTTPClientTransport(proxy.url(), {
        fetch: continuityFetch({ telemetry, metrics: figures, fetch: spy }),
      }),
    );
    const call = client.callTool({ name: 'charge', arguments: { cents: 500 } });
    // Cut the call's connection twice, each time once the attempt reached the server (and the body runs).
    await cutTwiceThenRelease(
      proxy,
      () => ({ attempts: toolCalls, started }),
      () => release(),
    );
    const result = (await call) as { content: { text: string }[] };
    expect(result.content[0]?.text).toBe('charged 500');
    expect(charges).toBe(1);
    await client.close();

    await eventually(
      () => exporter.getFinishedSpans().some((s) => s.kind === SpanKind.SERVER),
      10_000,
      'spans',
    );
    const spans = exporter.getFinishedSpans();
    const clients = spans.filter((s) => s.kind === SpanKind.CLIENT);
    const servers = spans.filter((s) => s.kind === SpanKind.SERVER && s.name.startsWith('tools/call'));
    expect(clients).toHaveLength(1);
    expect(servers).toHaveLength(1);
    const [clientSpan] = clients as [ReadableSpan];
    const [serverSpan] = servers as [ReadableSpan];

    // The conventions' names.
    expect(clientSpan.name).toBe('tools/call charge');
    expect(serverSpan.name).toBe('tools/call charge');
    for (const s of [clientSpan, serverSpan]) {
      expect(s.attributes[McpAttr.methodName]).toBe('tools/call');
      expect(s.attributes[McpAttr.toolName]).toBe('charge');
      expect(s.attributes[McpAttr.protocolVersion]).toBe(MODERN);
      expect(s.attributes[McpAttr.requestId]).toBeDefined();
      expect(s.attributes[McpAttr.errorType]).toBeUndefined();
    }

    // Three attempts (the first and two re-issues), two cuts, on the client's one span.
    const attempts = events(clientSpan, ContinuityEvent.attempt);
    expect(attempts.map((e) => e.attributes?.['mcp_continuity.attempt'])).toEqual([0, 1, 2]);
    expect(events(clientSpan, ContinuityEvent.cut)).toHaveLength(2);
    expect(events(clientSpan, ContinuityEvent.outcomeUnknown)).toHaveLength(0);
    // The re-issues attached to the one execution.
    expect(events(serverSpan, ContinuityEvent.attach)).toHaveLength(2);

    // One trace: the server's execution is the client span's child.
    expect(serverSpan.spanContext().traceId).toBe(clientSpan.spanContext().traceId);
    expect(serverSpan.parentSpanContext?.spanId).toBe(clientSpan.spanContext().spanId);
    // Each attempt (the first and both re-issues, new JSON-RPC ids, one key) carries the client span's
    // context in params._meta: whichever attempt reaches the server first, its work joins this trace.
    const sent = bodies
      .filter((b) => b.includes('"tools/call"'))
      .map((b) => JSON.parse(b) as { id: unknown; params: { _meta?: Record<string, unknown> } });
    expect(sent).toHaveLength(3);
    expect(new Set(sent.map((m) => m.id)).size).toBe(3);
    const { traceId, spanId } = clientSpan.spanContext();
    for (const m of sent) expect(m.params._meta?.traceparent).toBe(`00-${traceId}-${spanId}-01`);

    // Duration metrics under the conventions' names (seconds): one call, one execution.
    const collected = await sdkMetrics.collect();
    expect(collected.descriptor(McpMetric.clientOperationDuration)?.unit).toBe('s');
    expect(collected.histogram(McpMetric.clientOperationDuration).count).toBe(1);
    expect(
      collected.histogram(McpMetric.serverOperationDuration, { 'mcp.method.name': 'tools/call' }).count,
    ).toBe(1);
    // Item 3's 2026 figures: two re-issues, one call of three attempts.
    const f = figures.figures();
    expect(f['mcp_continuity.client.reissues']).toBe(2);
    expect(f['mcp_continuity.client.call_attempts.count']).toBe(1);
    expect(f['mcp_continuity.client.call_attempts.sum']).toBe(3);
    expect(f['mcp_continuity.client.outcome_unknown']).toBe(0);
    // The server: one execution, the two re-issues attached to it.
    const s = serverFigures.figures();
    expect(s['mcp_continuity.server.keyed_executions']).toBe(1);
    expect(s['mcp_continuity.server.keyed_attaches']).toBe(2);
    // Its memo entry lives on, answered, for the memo window (createKeyedRequests observes its memo).
    expect(s['mcp_continuity.server.memo_entries']).toBe(1);
  }, 60_000);

  it('an unkeyed call cut mid-stream: the span ends as outcome unknown, with its reason and error.type', async () => {
    const client = new Client(
      { name: 'trace', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } },
    );
    // Without the extension the charge cannot be re-issued safely: the cut ends it as outcome unknown.
    const figures = new ContinuityMetrics();
    const fetch = continuityFetch({ telemetry, useExtension: false, metrics: figures });
    await client.connect(new StreamableHTTPClientTransport(proxy.url(), { fetch }));
    const call = client.callTool({ name: 'charge', arguments: { cents: 5 } });
    const settled = call.then(
      () => 'answered',
      (e: unknown) => e,
    );
    await eventually(() => toolCalls === 1 && started === 1, 30_000, 'the call at the server');
    await wait(100);
    expect(proxy.reset()).toBeGreaterThan(0);
    const error = (await settled) as { code?: number };
    expect(error.code).toBe(-32050);
    release();
    await client.close();

    await eventually(
      () =>
        exporter.getFinishedSpans().some((s) => s.kind === SpanKind.SERVER && s.name === 'tools/call charge'),
      10_000,
      'the server span',
    );
    const [clientSpan, ...others] = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.CLIENT);
    expect(others).toHaveLength(0);
    expect(clientSpan?.attributes[McpAttr.errorType]).toBe('-32050');
    expect(clientSpan?.attributes[McpAttr.responseStatusCode]).toBe('-32050');
    expect(clientSpan?.status.code).toBe(SpanStatusCode.ERROR);
    expect(events(clientSpan as ReadableSpan, ContinuityEvent.attempt)).toHaveLength(1);
    const [unknown] = events(clientSpan as ReadableSpan, ContinuityEvent.outcomeUnknown);
    expect(unknown?.attributes?.['mcp_continuity.reason']).toBeTypeOf('string');
    // The server's SERVER span for the unkeyed call: the client span's child, ended by the cut (closing
    // an unkeyed call's stream cancels it).
    const served = exporter
      .getFinishedSpans()
      .filter((s) => s.kind === SpanKind.SERVER && s.name === 'tools/call charge');
    expect(served).toHaveLength(1);
    expect(served[0]?.attributes[McpAttr.errorType]).toBe('cancelled');
    expect(served[0]?.attributes[McpAttr.protocolVersion]).toBe(MODERN);
    expect(served[0]?.spanContext().traceId).toBe(clientSpan?.spanContext().traceId);
    expect(served[0]?.parentSpanContext?.spanId).toBe(clientSpan?.spanContext().spanId);
    const collected = await sdkMetrics.collect();
    expect(collected.histogram(McpMetric.clientOperationDuration).count).toBe(1);
    expect(
      collected.histogram(McpMetric.serverOperationDuration, { 'mcp.method.name': 'tools/call' }).count,
    ).toBe(1);
    const reason = String(unknown?.attributes?.['mcp_continuity.reason']);
    expect(figures.figures()[`mcp_continuity.client.outcome_unknown{reason=${reason}}`]).toBe(1);
  }, 60_000);

  it('without an SDK (no telemetry passed, nothing registered) no trace context is added to any request', async () => {
    expect(trace.getTracerProvider().getTracer('x').startSpan('x').isRecording()).toBe(false);
    const bodies: string[] = [];
    const spy: typeof fetch = (input, init) => {
      if (typeof init?.body === 'string') bodies.push(init.body);
      return fetch(input, init);
    };
    const client = new Client(
      { name: 'trace', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: MODERN } } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(proxy.url(), { fetch: continuityFetch({ fetch: spy }) }),
    );
    const call = client.callTool({ name: 'charge', arguments: { cents: 1 } });
    await eventually(() => started === 1, 30_000, 'the call at the server');
    release();
    await call;
    await client.close();
    const calls = bodies.filter((b) => b.includes('"tools/call"'));
    expect(calls).toHaveLength(1);
    expect(calls[0]).not.toContain('traceparent');
    // The server (given the test's provider) starts its execution's span as a root: no context came.
    const executions = () => exporter.getFinishedSpans().filter((s) => s.name === 'tools/call charge');
    await eventually(() => executions().length > 0, 10_000, 'the server span');
    const spans = executions();
    expect(spans.map((s) => s.kind)).toEqual([SpanKind.SERVER]);
    expect(spans[0]?.parentSpanContext).toBeUndefined();
  }, 60_000);
});
