/** Test and demo utilities: `import { FaultProxy, memoStoreContract } from 'mcp-continuity/testing'`. */

export { type CursorStoreFactory, cursorStoreContract } from './contracts/cursor-store.js';
export {
  type EventLogContractOptions,
  type EventLogFactory,
  eventLogContract,
} from './contracts/event-log.js';
export {
  type ContractCase,
  ContractClock,
  failingCases,
  registerContract,
  type TestApi,
} from './contracts/harness.js';
export {
  type MemoStoreContractOptions,
  type MemoStoreFactory,
  memoStoreContract,
} from './contracts/memo-store.js';
export { type TaskStoreFactory, taskStoreContract } from './contracts/task-store.js';
export {
  type FaultEvent,
  FaultProxy,
  type FaultProxyOptions,
  type ProxiedConnection,
} from './fault-proxy.js';
