import { existsSync } from 'node:fs';
import { explainText } from '../trace/explain.js';
import { readTrace } from '../trace/read.js';
import { replayText, replayTrace } from '../trace/replay.js';

/**
 * `mcp-continuity explain <trace>` and `replay <trace>`: the trace module's readers on a file. The exit
 * code: 0, or 1 when replay finds a decision that differs, 2 when the file cannot be read.
 */
export function traceCommand(command: 'explain' | 'replay', path: string): number {
  if (!existsSync(path)) {
    console.error(`mcp-continuity ${command}: no trace at ${path}`);
    return 2;
  }
  const { records, skipped } = readTrace(path);
  if (skipped > 0) console.error(`(${skipped} line(s) that are not trace records skipped)`);
  if (command === 'explain') {
    console.log(explainText(records) || 'the trace holds no machine actors');
    return 0;
  }
  const report = replayTrace(records);
  console.log(replayText(report));
  return report.differences.length > 0 ? 1 : 0;
}
