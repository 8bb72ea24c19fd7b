import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProbeReport } from '../../machines/probe/report.js';
import { listenOnLoopback } from '../support/listen.js';
import { type ProbedServer, startSdkV1Server } from './probe-servers.js';

/** `mcp-continuity probe` as a user runs it: a process, its output and its exit status. */
function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'probe', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    }),
  );
}

describe('mcp-continuity probe (the command)', () => {
  let server: ProbedServer;
  beforeAll(async () => {
    server = await startSdkV1Server();
  });
  afterAll(() => server.close());

  it('--json: the report, and exit 1 because a MUST failed (Origin); no tool is called without --tool', async () => {
    const { code, stdout } = await run([
      server.url,
      '--json',
      '--stream-wait',
      '200',
      '--header',
      'X-Probe: 1',
    ]);
    const report = JSON.parse(stdout) as ProbeReport & { exitStatus: number };
    expect(report.exitStatus).toBe(1);
    expect(code).toBe(1);
    expect(report.checks.find((c) => c.id === '2025.origin')?.status).toBe('failed');
    expect(report.checks.find((c) => c.id === '2025.duplicate-id')?.status).toBe('not-checked');
    expect(server.lookups()).toBe(0);
  }, 60_000);

  it('a port where nothing listens: said so, exit 3', async () => {
    const closed = createServer();
    const port = await listenOnLoopback(closed);
    await new Promise((r) => closed.close(r));
    const { code, stdout } = await run([`http://127.0.0.1:${port}/mcp`, '--timeout', '2000']);
    expect(stdout).toContain('did not answer any request');
    expect(code).toBe(3);
  }, 60_000);

  it('unusable arguments: exit 2 with the reason', async () => {
    const { code, stderr } = await run(['ftp://example.invalid/mcp']);
    expect(stderr).toContain('not an http:// or https:// URL');
    expect(code).toBe(2);
  }, 60_000);
});
