export {
  createInspectorFeed,
  type FiguresSource,
  type InspectorFeed,
  type InspectorFeedOptions,
} from './feed.js';
export type { HubLimits } from './hub.js';
export { type InspectorServer, type InspectorServerOptions, startInspectorServer } from './server.js';
