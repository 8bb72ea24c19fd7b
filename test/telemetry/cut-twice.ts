import type { Server } from 'node:http';
import { expect } from 'vitest';
import type { FaultProxy } from '../../src/testing/fault-proxy.js';
import { eventually } from '../metrics/otel.js';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Cuts a running keyed call's connection twice, each time once its attempt reached the server and its
 * response started (a mid-stream cut), waits for the third attempt, then lets the body finish.
 * `server()` reads the attempts that reached the server and the bodies started so far.
 */
export async function cutTwiceThenRelease(
  proxy: FaultProxy,
  server: () => { readonly attempts: number; readonly started: number },
  release: () => void,
): Promise<void> {
  for (let cut = 1; cut <= 2; cut++) {
    await eventually(
      () => server().attempts === cut && server().started === 1,
      30_000,
      `attempt ${cut} at the server`,
    );
    await wait(100); // the attempt's response has started: the cut is mid-stream
    expect(proxy.reset()).toBeGreaterThan(0);
  }
  await eventually(() => server().attempts === 3, 30_000, 'the third attempt at the server');
  await wait(100);
  release();
}

/** Calls `counted` for each `tools/call` POST reaching `http` (the start of its body names the method). */
export function onToolCall(http: Server, counted: () => void): void {
  http.on('request', (req) => {
    let head = '';
    req.on('data', (chunk: Buffer) => {
      if (head.length < 200) head += chunk.toString('utf8');
    });
    req.on('end', () => {
      if (head.includes('"tools/call"')) counted();
    });
  });
}
