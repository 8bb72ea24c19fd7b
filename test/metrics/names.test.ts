import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ALL_METRICS } from '../../src/metrics/index.js';

describe('metric names', () => {
  it('follow the OTel conventions: dotted lower case under mcp_continuity, no unit in the name', () => {
    const names = ALL_METRICS.map((m) => m.name);
    expect(new Set(names).size).toBe(names.length);
    for (const m of ALL_METRICS) {
      expect(m.name).toMatch(/^mcp_continuity\.(server|client)\.[a-z_]+$/);
      expect(m.name).not.toMatch(/_(ms|seconds|total)$/);
      expect(m.unit).toMatch(/^(ms|\{[a-z]+\})$/);
    }
  });

  it('are each listed in docs/operations.md with their unit', async () => {
    const readme = await readFile('docs/operations.md', 'utf8');
    for (const m of ALL_METRICS) expect(readme).toContain(`| \`${m.name}\` | ${m.kind}, \`${m.unit}\` |`);
  });
});
