export { encode, REDACTED, revive } from './codec.js';
export { type ActorStory, type CallTold, callsTold, explainText, explainTrace } from './explain.js';
export { readTrace } from './read.js';
export type { TraceRecord } from './record.js';
export { createTrace, type Trace, type TraceOptions } from './recorder.js';
export { catalogById, type ReplayDifference, type ReplayReport, replayText, replayTrace } from './replay.js';
