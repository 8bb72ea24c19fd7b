/**
 * mcp-continuity: an MCP Streamable HTTP transport core that never confuses a dropped connection with a
 * lost session. The pure core (machines and decisions) and the runtime built on it.
 */
export * from '../machines/index.js';
export type { EventLog, StoredEvent } from './server/event-log.js';
export {
  type ContinuityServer,
  type ContinuityServerOptions,
  createContinuityServer,
  type Principal,
} from './server/handler.js';
export { MemoryEventLog } from './server/memory-event-log.js';
export type { McpServerLike, SessionInfo } from './server/session.js';
