import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNode22 } from './node22.js';
import { type ConformanceApp, startConformanceApp } from './server-app.js';

/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16) against
 * `createContinuityServer` + a v1 `McpServer`, every server scenario it has (`--suite all`: the active
 * ones and the pending `json-schema-2020-12` and `server-sse-polling`). 0.1.16 covers 2025-06-18 and
 * 2025-11-25; it has no 2026-07-28 scenario. Every check must pass, except the scenarios listed with a
 * reason in expected-failures.yml.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const BASELINE = fileURLToPath(new URL('./expected-failures.yml', import.meta.url));
/** The whole suite takes ~1–2 s here; the bound leaves room for a loaded machine. */
const CLI_TIMEOUT_MS = 45_000;

interface Check {
  readonly id: string;
  readonly status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  readonly errorMessage?: string;
}

function run(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      findNode22(),
      [CLI, ...args],
      { cwd: ROOT, timeout: CLI_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** `server: [] ` or `server:` then `  - name  # reason` lines; a listed scenario without a reason is an error. */
function readBaseline(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let inServer = false;
  for (const line of text.split('\n')) {
    if (/^\s*(#.*)?$/.test(line)) continue;
    const section = /^(\w+):/.exec(line);
    if (section) {
      inServer = section[1] === 'server';
      continue;
    }
    const item = /^\s+-\s*([\w./-]+)\s*(?:#\s*(.*))?$/.exec(line);
    if (!inServer || !item) continue;
    const [, name, reason] = item;
    if (!reason?.trim()) throw new Error(`expected-failures.yml: ${name} has no reason`);
    out.set(name as string, reason.trim());
  }
  return out;
}

/** Scenario name → its checks, from the `-o` directory (`server-<scenario>-<timestamp>/checks.json`). */
function readResults(dir: string): Map<string, Check[]> {
  const out = new Map<string, Check[]>();
  for (const entry of readdirSync(dir)) {
    const name = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(entry)?.[1];
    if (!name) continue;
    out.set(name, JSON.parse(readFileSync(path.join(dir, entry, 'checks.json'), 'utf8')) as Check[]);
  }
  return out;
}

describe('MCP conformance suite 0.1.16, server scenarios', () => {
  let app: ConformanceApp;
  let outDir: string;
  beforeAll(async () => {
    app = await startConformanceApp();
    outDir = mkdtempSync(path.join(os.tmpdir(), 'mcp-conformance-'));
  });
  afterAll(async () => {
    await app?.close();
    if (outDir) rmSync(outDir, { recursive: true, force: true });
  });

  it('passes every check but the explained expected failures', async () => {
    const baseline = readBaseline(readFileSync(BASELINE, 'utf8'));
    const listed = await run(['list', '--server']);
    expect(listed.code, listed.stderr).toBe(0);
    const scenarios = [...listed.stdout.matchAll(/^\s+-\s+(\S+)\s+\[/gm)].map((m) => m[1] as string);
    expect(scenarios.length).toBeGreaterThanOrEqual(30);

    const started = performance.now();
    const result = await run([
      'server',
      '--url',
      app.url,
      '--suite',
      'all',
      '--expected-failures',
      BASELINE,
      '-o',
      outDir,
    ]);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);

    const results = readResults(outDir);
    // Every scenario the suite has ran and left its checks (none crashed out of the report).
    expect([...results.keys()].sort()).toEqual([...scenarios].sort());
    const failing = new Map<string, string[]>();
    let passed = 0;
    let warnings = 0;
    for (const [scenario, checks] of results) {
      for (const c of checks) {
        if (c.status === 'SUCCESS') passed++;
        if (c.status === 'WARNING') warnings++;
        if (c.status === 'FAILURE') {
          failing.set(scenario, [...(failing.get(scenario) ?? []), `${c.id}: ${c.errorMessage ?? ''}`]);
        }
      }
    }
    const unexpected = [...failing].filter(([s]) => !baseline.has(s));
    expect(unexpected, JSON.stringify(unexpected, null, 2)).toEqual([]);
    // A listed scenario that passes is a stale entry: remove it from the list.
    const stale = [...baseline.keys()].filter((s) => !failing.has(s));
    expect(stale).toEqual([]);
    // The CLI applies the same baseline: exit 0.
    expect(result.code, result.stdout.slice(-2_000) + result.stderr).toBe(0);
    expect(passed).toBeGreaterThanOrEqual(46);
    console.log(
      `conformance 0.1.16: ${passed} checks passed, ${failing.size} scenarios expected to fail, ${warnings} warnings, ${results.size} scenarios in ${seconds} s`,
    );
  }, 90_000);
});
