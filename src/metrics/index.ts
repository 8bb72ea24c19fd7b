export { ClientMetrics } from './client.js';
export { ContinuityMetrics, type ContinuityMetricsOptions } from './continuity-metrics.js';
export {
  ALL_METRICS,
  ClientMetric,
  CONVENTION_METRICS,
  ConventionMetric,
  type MetricKind,
  type MetricSpec,
  ServerMetric,
} from './names.js';
export { METER_NAME, METER_VERSION } from './recorder.js';
export { ServerMetrics } from './server.js';
export type { Figures } from './tally.js';
