/**
 * Row 7's server process, mcp-continuity: started from process start, it prints `READY <url>` once it
 * listens. Bundled with esbuild (packages left external) by rows/cold-start.ts, then run by plain `node`.
 */
import { startOurs } from '../lib/ours-server.js';

const server = await startOurs();
process.stdout.write(`READY ${server.url}\n`);
