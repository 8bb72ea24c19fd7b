import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { until } from './ws-client.js';

/** `mcp-continuity inspect`: prints where the page and the feed are, serves, and stops cleanly on SIGTERM. */
describe('mcp-continuity inspect', () => {
  it('serves the page on the port it prints, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'inspect', '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      // The last line printed: everything before it is in.
      await until(() => output.includes('createWebSocketInspector'), 30_000);
      const url = /inspector page: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(output)?.[1] as string;
      expect(output).toMatch(/createInspectorFeed\(\{ url: 'ws:\/\/127\.0\.0\.1:\d+\/feed' \}\)/);
      const page = await fetch(url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('mcp-continuity inspector');
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
