import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolResultSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { exchange, PROTOCOL_VERSION } from '../lib/raw.js';
import { startRemote } from '../lib/remote.js';
import { type ClientKind, connectClient, type ServerKind } from '../lib/stacks.js';
import { bounded } from '../lib/stats.js';
import { progressMessage } from '../lib/tools.js';

/** Row 1: notifications per second on one session, one tool call streaming `count` progress notifications. */
export interface ThroughputResult {
  readonly count: number;
  readonly received: number;
  readonly ms: number;
  readonly perSecond: number;
  readonly errors: string[];
}

const WARMUP = 2_000;

/** One stack: a warm-up call, then the measured call. Every notification must arrive, once. */
export async function notifyStack(
  serverKind: ServerKind | 'raw',
  clientKind: ClientKind,
  count: number,
  timeoutMs: number,
): Promise<ThroughputResult> {
  const server = await startRemote(serverKind);
  const client = await connectClient(clientKind, server.url);
  try {
    const run = async (n: number): Promise<{ ms: number; received: number }> => {
      let received = 0;
      let lastProgress = 0;
      let outOfOrder = 0;
      const start = performance.now();
      const result = await bounded(
        client.client.callTool({ name: 'stream', arguments: { count: n } }, CallToolResultSchema, {
          onprogress: (p) => {
            received++;
            if (p.progress !== lastProgress + 1) outOfOrder++;
            lastProgress = p.progress;
          },
          timeout: timeoutMs,
          resetTimeoutOnProgress: true,
        }),
        timeoutMs,
        `${serverKind}/${clientKind}: stream ${n}`,
      );
      const ms = performance.now() - start;
      const text = (result.content as Array<{ text?: string }>)[0]?.text;
      if (text !== `sent ${n}`) throw new Error(`unexpected result ${JSON.stringify(result)}`);
      if (outOfOrder > 0) throw new Error(`${outOfOrder} notifications out of order`);
      return { ms, received };
    };
    await run(WARMUP);
    const { ms, received } = await run(count);
    if (received !== count) throw new Error(`received ${received} of ${count} notifications`);
    return {
      count,
      received,
      ms,
      perSecond: count / (ms / 1000),
      errors: [...(await server.stats()).errors, ...client.errors],
    };
  } finally {
    await client.close();
    await server.close();
  }
}

/** Reference (g): raw Node http (bench/lib/raw.ts) writing the same frames, read by fetch + eventsource-parser + JSON.parse: no MCP client. */
export async function notifyRaw(count: number, timeoutMs: number): Promise<ThroughputResult> {
  const server = await startRemote('raw');
  try {
    const run = async (n: number) => {
      const start = performance.now();
      const r = await exchange(
        `${server.url.replace(/\/mcp$/, '/sse')}?count=${n}`,
        { method: 'POST', headers: { Accept: 'text/event-stream' }, body: '{}' },
        { timeoutMs },
      );
      const ms = performance.now() - start;
      // n notifications + the result.
      if (r.messages !== n + 1) throw new Error(`raw: received ${r.messages - 1} of ${n}`);
      return ms;
    };
    await run(WARMUP);
    const ms = await run(count);
    return { count, received: count, ms, perSecond: count / (ms / 1000), errors: [] };
  } finally {
    await server.close();
  }
}

/**
 * Reference (f): the SDK `Client` alone, no HTTP. An in-memory transport answers initialize, then delivers
 * `count` progress notifications and the result as JS objects, 100 per macrotask (the SDK runs notification
 * handlers a microtask late, so a response in the same tick would overtake them). What any stack that ends
 * in an SDK `Client` can reach at most on this machine.
 */
export async function notifySdkClientOnly(count: number, timeoutMs: number): Promise<ThroughputResult> {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const transport = new InMemoryServerTransport();
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(transport);
  try {
    const run = async (n: number) => {
      transport.count = n;
      let received = 0;
      const start = performance.now();
      await bounded(
        client.callTool({ name: 'stream', arguments: { count: n } }, CallToolResultSchema, {
          onprogress: () => {
            received++;
          },
          timeout: timeoutMs,
        }),
        timeoutMs,
        'SDK client only',
      );
      const ms = performance.now() - start;
      if (received !== n) throw new Error(`SDK client only: received ${received} of ${n}`);
      return ms;
    };
    await run(WARMUP);
    const ms = await run(count);
    return { count, received: count, ms, perSecond: count / (ms / 1000), errors: [] };
  } finally {
    await client.close();
  }
}

class InMemoryServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  count = 0;
  async start(): Promise<void> {}
  async close(): Promise<void> {
    this.onclose?.();
  }
  async send(message: JSONRPCMessage): Promise<void> {
    if (!('method' in message) || !('id' in message)) return;
    const id = message.id;
    if (message.method === 'initialize') {
      const result = {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: { tools: {} },
        serverInfo: { name: 'memory', version: '1' },
      };
      setImmediate(() => this.onmessage?.({ jsonrpc: '2.0', id, result }));
      return;
    }
    const token =
      (message.params?._meta as { progressToken?: string | number } | undefined)?.progressToken ?? 0;
    const n = this.count;
    let next = 1;
    const pump = () => {
      for (const end = Math.min(n, next + 99); next <= end; next++) {
        this.onmessage?.(progressMessage(token, next) as JSONRPCMessage);
      }
      if (next <= n) setImmediate(pump);
      else {
        const result = { content: [{ type: 'text', text: `sent ${n}` }] };
        setImmediate(() => this.onmessage?.({ jsonrpc: '2.0', id, result }));
      }
    };
    setImmediate(pump);
  }
}
