import { judgeLegacy } from '../../../machines/probe/legacy-checks.js';
import { judgeModern } from '../../../machines/probe/modern-checks.js';
import type { ProbeOptions } from '../../../machines/probe/options.js';
import type { ProbeReport } from '../../../machines/probe/report.js';
import { answeredAtAll } from '../../../machines/probe/wire.js';
import { gatherLegacy } from './legacy.js';
import { gatherModern } from './modern.js';

/** Probes one endpoint, both eras in turn (2025 first: its sessions are ended before 2026 starts). */
export async function runProbe(options: ProbeOptions): Promise<ProbeReport> {
  const legacy = await gatherLegacy(options);
  const modern = await gatherModern(options);
  return {
    url: options.url,
    reachable: answeredAtAll([legacy.initialize, modern.discover]),
    checks: [...judgeLegacy(legacy), ...judgeModern(modern)],
  };
}
