/**
 * Row 7's server process, the official SDK (its `simpleStreamableHttp` wiring, no event store): prints
 * `READY <url>` once it listens. Bundled and run as cold/ours.ts is.
 */
import { startSdk } from '../lib/sdk-server.js';

const server = await startSdk(false);
process.stdout.write(`READY ${server.url}\n`);
