import { WebSocket } from 'ws';
import type { PageMessage } from '../../src/inspect/wire.js';

/** A WebSocket to the inspector server that records what it receives and how it closed. */
export interface Client {
  readonly ws: WebSocket;
  /** Page messages received, flattened out of their batches. */
  readonly messages: PageMessage[];
  readonly closed: Promise<number>;
}

export function open(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const ws = new WebSocket(url, { headers });
  const messages: PageMessage[] = [];
  ws.on('message', (data) => messages.push(...(JSON.parse(String(data)) as PageMessage[])));
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    ws.on('open', () => resolve({ ws, messages, closed }));
    ws.on('error', reject);
  });
}

/** Polls until `check` returns a value; fails after `timeoutMs`. */
export async function until<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
