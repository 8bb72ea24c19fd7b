import { existsSync } from 'node:fs';
import { explainText } from '../trace/explain.js';
import { readTrace } from '../trace/read.js';
import { replayText, replayTrace } from '../trace/replay.js';
import { pageAsOf, scrubTrace } from '../trace/scrub.js';

/**
 * `mcp-continuity explain <trace>` and `replay <trace> [--open]`: the trace module's readers on a file. The
 * exit code: 0, or 1 when replay finds a decision that differs, 2 when the file cannot be read.
 */
export function traceCommand(command: 'explain' | 'replay', path: string): number {
  return readAndRun(command, path).code;
}

/**
 * `replay <trace> --open`: the regression check, then the inspector page over the trace with a time
 * scrubber, served until `until` resolves (Ctrl-C in the CLI). The page's URL goes to `onServing`.
 */
export async function replayOpen(
  path: string,
  options: {
    readonly port?: number;
    readonly until: Promise<void>;
    readonly onServing?: (url: string) => void;
  },
): Promise<number> {
  const ran = readAndRun('replay', path);
  if (ran.records === undefined) return ran.code;
  const records = ran.records;
  // Loaded on use: the page needs `ws` (an optional peer), explain and replay do not.
  const { startInspectorServer } = await import('../inspect/server.js');
  const scrubbed = scrubTrace(records);
  const inspector = await startInspectorServer({
    port: options.port ?? 0,
    scrubber: {
      stops: scrubbed.stops,
      pageAt: (stop) => pageAsOf(scrubbed, stop, { name: `trace ${path}` }),
      note: ran.text,
    },
  });
  console.log(`\ninspector page over the trace (${scrubbed.stops.length} stops): ${inspector.url}`);
  console.log('Ctrl-C to stop');
  options.onServing?.(inspector.url);
  await options.until;
  await inspector.close();
  return ran.code;
}

function readAndRun(
  command: 'explain' | 'replay',
  path: string,
): { code: number; records?: ReturnType<typeof readTrace>['records']; text?: string } {
  if (!existsSync(path)) {
    console.error(`mcp-continuity ${command}: no trace at ${path}`);
    return { code: 2 };
  }
  const { records, skipped } = readTrace(path);
  if (skipped > 0) console.error(`(${skipped} line(s) that are not trace records skipped)`);
  if (command === 'explain') {
    console.log(explainText(records) || 'the trace holds no machine actors');
    return { code: 0, records };
  }
  const report = replayTrace(records);
  const text = replayText(report);
  console.log(text);
  return { code: report.differences.length > 0 ? 1 : 0, records, text };
}
