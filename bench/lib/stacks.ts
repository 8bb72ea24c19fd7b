import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ContinuityClientTransport } from '../../src/index.js';
import { type RunningServer, within } from './listen.js';
import { startOurs } from './ours-server.js';
import { startSdk } from './sdk-server.js';

// The servers live in files of their own (the cold-start row loads each without the other's code).
export { closeHttp, listen, type RunningServer } from './listen.js';
export { startOurs } from './ours-server.js';
export { startSdk } from './sdk-server.js';

export type ServerKind = 'ours' | 'sdk' | 'sdk-store';
export type ClientKind = 'ours' | 'sdk';

export const SERVER_LABEL: Record<ServerKind, string> = {
  ours: 'mcp-continuity server',
  sdk: 'SDK server (no event store)',
  'sdk-store': 'SDK server + example InMemoryEventStore',
};
export const CLIENT_LABEL: Record<ClientKind, string> = {
  ours: 'ContinuityClientTransport',
  sdk: 'SDK StreamableHTTPClientTransport',
};
export function startServer(kind: ServerKind): Promise<RunningServer> {
  if (kind === 'ours') return startOurs();
  return startSdk(kind === 'sdk-store');
}

export interface RunningClient {
  readonly client: Client;
  readonly errors: string[];
  close(): Promise<void>;
}

/** An SDK `Client` over our transport or the SDK's, connected (initialize done). */
export async function connectClient(kind: ClientKind, url: string): Promise<RunningClient> {
  const errors: string[] = [];
  const transport =
    kind === 'ours'
      ? new ContinuityClientTransport(new URL(url))
      : new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: 'bench', version: '1.0.0' });
  client.onerror = (e) => errors.push(e.message);
  const ok = await within(
    client.connect(transport).then(() => true),
    10_000,
  );
  if (!ok) throw new Error(`${kind} client: connect got no answer within 10 s`);
  return {
    client,
    errors,
    async close() {
      await within(client.close(), 3_000);
    },
  };
}
