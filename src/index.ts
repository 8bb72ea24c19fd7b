/**
 * mcp-continuity: an MCP Streamable HTTP transport core that never confuses a dropped connection with a
 * lost session. The pure core (machines and decisions) and the runtime built on it.
 */

export type { ListenMissed } from '../machines/client/listen.machine.js';
export {
  type AttemptInput,
  type ModernCallEvent,
  type ModernCallInput,
  type ModernCallOutput,
  modernCallMachine,
} from '../machines/client/modern-call.machine.js';
export * from '../machines/index.js';
export {
  classifyEra,
  type Era,
  type EraFacts,
  isModernVersion,
  MODERN_PROTOCOL_VERSION,
} from '../machines/server/era.js';
export { DEFAULT_LISTEN_LOG_LIMITS, type ListenLogLimits } from '../machines/server/listen-log.js';
export type { FollowOutcome, FollowPolicy } from '../machines/tasks/task-follow.js';
export {
  DEFAULT_JOURNAL_POLICY,
  type JournalEntry,
  type JournalPolicy,
} from '../machines/tasks/task-journal.js';
export { type CursorStore, FileCursorStore, MemoryCursorStore } from './client/cursor-store.js';
export type { FetchLike } from './client/exchange.js';
export { type ContinuityFetchOptions, continuityFetch } from './client/modern/continuity-fetch.js';
export {
  type ExtTasksDispatch,
  type ExtTasksDispatcherOptions,
  type ExtTasksDispatchOptions,
  type ExtTasksJson,
  type ExtTasksResponse,
  extTasksDispatcher,
} from './client/modern/ext-tasks-dispatcher.js';
export type { ListenGap } from './client/modern/listen.js';
export {
  FileTaskJournal,
  MemoryTaskJournal,
  type TaskJournalStore,
} from './client/modern/task-journal.js';
export {
  type FollowTaskOptions,
  followTask,
  type ResumedTask,
  type ResumedTasks,
  resumeTasks,
  type TaskFollowOptions,
} from './client/modern/tasks-follow.js';
export { isOutcomeUnknown, OUTCOME_UNKNOWN } from './client/outcome.js';
export { type ContinuityClientOptions, ContinuityClientTransport } from './client/transport.js';
export { ContinuityError, ErrorCode, isContinuityError } from './errors.js';
export {
  createInspectorFeed,
  type FiguresSource,
  type HubLimits,
  type InspectorFeed,
  type InspectorFeedOptions,
  type InspectorServer,
  type InspectorServerOptions,
  startInspectorServer,
} from './inspect/index.js';
export {
  ClientMetric,
  ClientMetrics,
  ContinuityMetrics,
  type ContinuityMetricsOptions,
  type Figures,
  type MetricSpec,
  ServerMetric,
  ServerMetrics,
} from './metrics/index.js';
export type {
  EventLog,
  EventLogObserver,
  SessionRecord,
  SessionRegistry,
  StoredEvent,
} from './server/event-log.js';
export {
  type ContinuityServer,
  type ContinuityServerOptions,
  createContinuityServer,
  type Principal,
} from './server/handler.js';
export { SSE_MAX_BUFFERED_BYTES, SSE_WRITE_STALL_MS, type SseLimits } from './server/http.js';
export {
  createKeyedRequests,
  type KeyedRequestsOptions,
  type KeyedRuntimeStats,
} from './server/keyed/index.js';
export type { MemoStore } from './server/memo-store.js';
export { MemoryEventLog } from './server/memory-event-log.js';
export { MemoryMemoStore, type MemoryMemoStoreOptions } from './server/memory-memo-store.js';
export type { ModernEndpoint, ModernOptions, ModernServerFactory } from './server/modern/endpoint.js';
export type { KeyedRequests, ModernCall, RunOnSdk } from './server/modern/keyed-hook.js';
export type { McpServerLike, SessionInfo } from './server/session.js';
export { SSE_PACE_BYTES } from './server/sse.js';
export { MemoryTaskStore } from './server/tasks/memory-task-store.js';
export { createTasks, type Tasks, type TasksOptions } from './server/tasks/runtime.js';
export type { TaskCreate, TaskStore } from './server/tasks/task-store.js';
export { ContinuityAttr, ContinuityEvent, McpAttr, McpMetric } from './telemetry/names.js';
export { ContinuityTelemetry, type ContinuityTelemetryOptions } from './telemetry/telemetry.js';
export { createTrace, type Trace, type TraceOptions } from './trace/recorder.js';
