/**
 * mcp-continuity: the public entry point. The runtime (HTTP server and client transport) builds on the
 * pure core re-exported here; until it lands, the core is the package.
 */
export * from '../machines/index.js';
