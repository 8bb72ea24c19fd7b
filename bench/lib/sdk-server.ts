import { randomUUID } from 'node:crypto';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { sdkSessionRouter } from '../../test/support/sdk-session-router.js';
import { closeHttp, listen, type RunningServer, within } from './listen.js';
import { benchMcpServer } from './tools.js';

/**
 * The official SDK server wired as its `simpleStreamableHttp` example: stateful, one
 * `StreamableHTTPServerTransport` + `McpServer` per session in a map, unknown id → 404. `store`: the SDK's
 * example `InMemoryEventStore` (examples/shared/inMemoryEventStore.js), one per session; otherwise none.
 */
export async function startSdk(
  store: boolean,
  createMcpServer: () => McpServer = benchMcpServer,
): Promise<RunningServer> {
  const errors: string[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const created: Array<{ transport: StreamableHTTPServerTransport; server: McpServer }> = [];
  const { server: httpServer, port } = await listen(
    sdkSessionRouter({
      lookup: (id) => sessions.get(id),
      onError: (e) => errors.push(String(e)),
      initialize: async () => {
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          eventStore: store ? new InMemoryEventStore() : undefined,
          onsessioninitialized: (id) => {
            sessions.set(id, transport);
          },
          onsessionclosed: (id) => {
            sessions.delete(id);
          },
        });
        transport.onerror = (e) => errors.push(String(e));
        const server = createMcpServer();
        created.push({ transport, server });
        await server.connect(transport);
        return transport;
      },
    }),
  );
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    http: httpServer,
    errors,
    sessionCount: () => sessions.size,
    async close() {
      for (const c of created) {
        await within(c.transport.close(), 1_000);
        await within(c.server.close(), 1_000);
      }
      await closeHttp(httpServer);
    },
  };
}
