import { readProbeArgs } from '../../../machines/probe/options.js';
import { exitStatus, renderText } from '../../../machines/probe/report.js';
import type { OptionValues } from '../args.js';
import { runProbe } from './run.js';

/**
 * `mcp-continuity probe <url>`: runs the probe and prints its report (text, or JSON with `--json`).
 * Resolves with the exit status: 0, 1 when a MUST failed, 2 when the arguments are unusable, 3 when the
 * server never answered.
 * Imports nothing beyond the package's own dependencies, so it runs right after `npm install`.
 */
export async function probeCommand(
  o: OptionValues,
  out: (text: string) => void = (t) => console.log(t),
  err: (text: string) => void = (t) => console.error(t),
): Promise<number> {
  const settings = readProbeArgs({
    url: o.url as string,
    header: o.header as readonly string[] | undefined,
    tool: o.tool as string | undefined,
    args: o.args as string,
    readOnly: o['read-only'] === true,
    timeout: o.timeout as number,
    maxBytes: o['max-bytes'] as number,
    streamWait: o['stream-wait'] as number,
    cutAfter: o['cut-after'] as number,
    evictWait: o['evict-wait'] as number | undefined,
    maxWait: o['max-wait'] as number,
  });
  if ('error' in settings) {
    err(`mcp-continuity probe: ${settings.error}`);
    return 2;
  }
  const report = await runProbe(settings);
  const status = exitStatus(report);
  out(o.json ? JSON.stringify({ ...report, exitStatus: status }, null, 2) : renderText(report));
  return status;
}
