import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ALL_METRICS } from '../../src/metrics/index.js';
import { CONVENTION_METRICS } from '../../src/metrics/names.js';

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
    for (const m of [...ALL_METRICS, ...CONVENTION_METRICS])
      expect(readme).toContain(`| \`${m.name}\` | ${m.kind}, \`${m.unit}\` |`);
  });

  it("the conventions' own are their session durations: histograms in seconds with their buckets", () => {
    expect(CONVENTION_METRICS.map((m) => m.name)).toEqual([
      'mcp.client.session.duration',
      'mcp.server.session.duration',
    ]);
    for (const m of CONVENTION_METRICS) {
      expect(m).toMatchObject({ kind: 'histogram', unit: 's' });
      expect(m.buckets?.[0]).toBe(0.01);
    }
  });
});
