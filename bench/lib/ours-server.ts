import {
  type ContinuityServer,
  type ContinuityServerOptions,
  createContinuityServer,
} from '../../src/index.js';
import { closeHttp, listen, type RunningServer, within } from './listen.js';
import { benchMcpServer } from './tools.js';

/**
 * createContinuityServer with library defaults (heartbeat 15 s, MemoryEventLog 1000 events/stream), except
 * the session limits: the memory row opens 10,000 sessions from one address, beyond the default share of
 * one principal (1,000).
 */
export async function startOurs(
  options: Partial<ContinuityServerOptions> = {},
): Promise<RunningServer & { continuity: ContinuityServer }> {
  const errors: string[] = [];
  const continuity = createContinuityServer({
    createMcpServer: () => benchMcpServer(),
    onError: (e) => errors.push(String(e)),
    limits: { maxSessions: 1_000_000, maxSessionsPerPrincipal: 1_000_000 },
    ...options,
  });
  const { server, port } = await listen(continuity.nodeHandler);
  return {
    continuity,
    url: `http://127.0.0.1:${port}/mcp`,
    http: server,
    errors,
    sessionCount: () => continuity.sessionCount(),
    async close() {
      await within(continuity.close(), 2_000);
      await closeHttp(server);
    },
  };
}
