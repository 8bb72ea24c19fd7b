/**
 * Every metric this package records, tabled once: the OTel instruments are created from this table, the
 * in-process tally is keyed by these names, and docs/operations.md's "Metrics" section lists the same rows.
 * Names follow the OTel conventions: dotted, lower case, no unit in the name (the unit is `unit`).
 */
export type MetricKind = 'counter' | 'histogram' | 'gauge';

export interface MetricSpec {
  readonly name: string;
  readonly kind: MetricKind;
  /** UCUM unit, as OTel expects: `ms`, or an annotation such as `{event}`. */
  readonly unit: string;
  readonly description: string;
  /** A histogram's bucket boundaries, when the default ones (made for milliseconds) do not fit. */
  readonly buckets?: readonly number[];
}

const spec = (name: string, kind: MetricKind, unit: string, description: string): MetricSpec => ({
  name: `mcp_continuity.${name}`,
  kind,
  unit,
  description,
});

export const ServerMetric = {
  resumes: spec(
    'server.resumes',
    'counter',
    '{resume}',
    'GET with Last-Event-ID answered 200: the stream is replayed from the cursor',
  ),
  replayedEvents: spec(
    'server.replayed_events',
    'counter',
    '{event}',
    'Events the log held after the cursor of an accepted resume, replayed to the client',
  ),
  resumeRejections: spec(
    'server.resume_rejections',
    'counter',
    '{resume}',
    'GET with Last-Event-ID refused (410, 400 or 404); attributes reason and http.response.status_code',
  ),
  lostEvents: spec(
    'server.lost_events',
    'counter',
    '{event}',
    'The exact lost count reported in 410 resume_window_exceeded answers',
  ),
  evictedEvents: spec(
    'server.evicted_events',
    'counter',
    '{event}',
    'Events the event log dropped under its retention policy (count or age bound)',
  ),
  sessionsEnded: spec(
    'server.sessions_ended',
    'counter',
    '{session}',
    'Sessions that ended; attribute reason: expired, terminated or shutdown',
  ),
  outcomeUnknown: spec(
    'server.outcome_unknown',
    'counter',
    '{request}',
    'Requests answered as outcome unknown (interrupted by a restart or a dead instance), and keyed calls declared so; attribute reason',
  ),
  reconnectLatency: spec(
    'server.reconnect_latency',
    'histogram',
    'ms',
    'Time from a stream response closing to the GET that resumes that stream arriving',
  ),
  retentionMargin: spec(
    'server.retention_margin',
    'gauge',
    'ms',
    'Advertised retention window minus the worst reconnect latency observed so far',
  ),
  rejectedRequests: spec(
    'server.rejected_requests',
    'counter',
    '{request}',
    'Requests refused as malformed or not allowed (bad JSON, too deep, aborted body, bad Host, …); attributes reason and http.response.status_code',
  ),
  limitedRequests: spec(
    'server.limited_requests',
    'counter',
    '{request}',
    'Requests refused at a server limit (429 or 503 with Retry-After); attributes reason and http.response.status_code',
  ),
  keyedExecutions: spec(
    'server.keyed_executions',
    'counter',
    '{execution}',
    'Keyed 2026-07-28 calls whose body started here (once per key, createKeyedRequests({ metrics }))',
  ),
  keyedAttaches: spec(
    'server.keyed_attaches',
    'counter',
    '{attempt}',
    'Attempts of a keyed call served from its log without starting anything (re-issues, attached or replayed)',
  ),
  memoEntries: spec(
    'server.memo_entries',
    'gauge',
    '{entry}',
    "Live entries of the continuity extension's memo (running, or inside their window), as its store counts them (createKeyedRequests({ metrics }); stores with liveEntries())",
  ),
  keyedRefusals: spec(
    'server.keyed_refusals',
    'counter',
    '{request}',
    'Keyed attempts answered with an error before anything ran (full memo, key reused, window passed…); attributes reason (the JSON-RPC code) and http.response.status_code',
  ),
} as const;

export const ClientMetric = {
  gaps: spec(
    'client.gaps',
    'counter',
    '{gap}',
    'Losses flagged to the application (onGap); attribute reason',
  ),
  lostEvents: spec(
    'client.lost_events',
    'counter',
    '{event}',
    'The exact lost count of flagged gaps (gaps of unknown size add nothing)',
  ),
  outcomeUnknown: spec(
    'client.outcome_unknown',
    'counter',
    '{call}',
    'Calls that ended as outcome unknown; attribute reason',
  ),
  reconnectAttempts: spec(
    'client.reconnect_attempts',
    'counter',
    '{attempt}',
    'Resume attempts: a stream was reopened with GET + Last-Event-ID after it closed',
  ),
  reconnectLatency: spec(
    'client.reconnect_latency',
    'histogram',
    'ms',
    'Time from a stream closing to the next successful response on that stream',
  ),
  reissues: spec(
    'client.reissues',
    'counter',
    '{reissue}',
    '2026-07-28 calls re-issued after an attempt ended without the answer (continuityFetch); attribute reason',
  ),
  callAttempts: spec(
    'client.call_attempts',
    'histogram',
    '{attempt}',
    'Attempts each 2026-07-28 call took, the first included (continuityFetch)',
  ),
  listenGaps: spec(
    'client.listen_gaps',
    'counter',
    '{gap}',
    'subscriptions/listen streams re-opened after a break; attribute reason: exact or unknown (what was missed)',
  ),
  listenMissedChanges: spec(
    'client.listen_missed_changes',
    'counter',
    '{change}',
    'The exact count of changes missed across listen re-opens (gaps of unknown size add nothing)',
  ),
  listenReopenAttempts: spec(
    'client.listen_reopen_attempts',
    'counter',
    '{attempt}',
    'Requests made to re-open broken subscriptions/listen streams (failed ones included)',
  ),
} as const;

export const ALL_METRICS: readonly MetricSpec[] = [
  ...Object.values(ServerMetric),
  ...Object.values(ClientMetric),
];

/** The conventions' advice for MCP durations (seconds), as for `mcp.*.operation.duration`. */
export const SESSION_DURATION_BUCKETS: readonly number[] = [
  0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300,
];

/**
 * Metrics of OpenTelemetry's MCP semantic conventions (GenAI conventions, `docs/gen-ai/mcp.md`) that are
 * recorded with our figures, under the conventions' own names: 2025 sessions' durations, in seconds.
 */
export const ConventionMetric = {
  clientSessionDuration: {
    name: 'mcp.client.session.duration',
    kind: 'histogram',
    unit: 's',
    description:
      'The duration of the MCP session as observed on the MCP client: from its Mcp-Session-Id to its end',
    buckets: SESSION_DURATION_BUCKETS,
  },
  serverSessionDuration: {
    name: 'mcp.server.session.duration',
    kind: 'histogram',
    unit: 's',
    description:
      'The duration of the MCP session as observed on the MCP server: from its creation (here, or in the record it was restored from) to its end',
    buckets: SESSION_DURATION_BUCKETS,
  },
} as const satisfies Record<string, MetricSpec>;

export const CONVENTION_METRICS: readonly MetricSpec[] = Object.values(ConventionMetric);
