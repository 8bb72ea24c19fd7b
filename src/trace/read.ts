import { existsSync, readFileSync } from 'node:fs';
import type { TraceRecord } from './record.js';

/**
 * A trace's records, oldest part first (`<path>.2`, `<path>.1`, then `<path>`). A line that is not a
 * record (a torn last line after a crash) is skipped and counted.
 */
export function readTrace(path: string, keep = 16): { records: TraceRecord[]; skipped: number } {
  const parts: string[] = [];
  for (let n = keep; n >= 1; n--) if (existsSync(`${path}.${n}`)) parts.push(`${path}.${n}`);
  parts.push(path);
  const records: TraceRecord[] = [];
  let skipped = 0;
  for (const part of parts)
    for (const line of readFileSync(part, 'utf8').split('\n')) {
      if (line.trim() === '') continue;
      try {
        const r = JSON.parse(line) as TraceRecord;
        if (r && ['actor', 'start', 'event', 'state', 'action'].includes(r.k) && typeof r.a === 'string')
          records.push(r);
        else skipped++;
      } catch {
        skipped++;
      }
    }
  return { records, skipped };
}
