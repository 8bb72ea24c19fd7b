/** Test and demo utilities: `import { FaultProxy } from 'mcp-continuity/testing'`. */
export {
  type FaultEvent,
  FaultProxy,
  type FaultProxyOptions,
  type ProxiedConnection,
} from './fault-proxy.js';
