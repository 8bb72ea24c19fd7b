import { type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { recordIncident } from '../trace/record-incident.js';
import { launchChromium } from './chromium.js';

/**
 * Issue 27, "whose replay in Chromium steps through it": the incident (a 404 during a charge, over real HTTP
 * on loopback) is recorded, `mcp-continuity replay <trace> --open` serves the page over it on an ephemeral
 * port, and chromium moves the scrubber: before the 404 the session is active and no call has ended; at
 * the 404 its stream is `sessionTerminated`; at the end the client re-initializes and the call is outcome
 * unknown. The page is today's machines re-driven from the recorded events.
 */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** What the page shows now: the client's state, the states of the stream cards, the markers. */
async function shown(page: Page) {
  return page.evaluate(() => ({
    client: document.querySelector('.actor[data-machine="client"]')?.getAttribute('data-state') ?? '',
    streams: [...document.querySelectorAll('.actor[data-machine="stream"]')].map(
      (el) => el.getAttribute('data-state') ?? '',
    ),
    unknown: document.querySelectorAll('#marker-list .marker.outcome-unknown').length,
    at: document.getElementById('scrub-at')?.textContent ?? '',
  }));
}

describe('mcp-continuity replay <trace> --open in chromium: the time scrubber', () => {
  it('steps through the incident: the state before the 404, at it, and at the end', async () => {
    const { path } = await recordIncident(cleanups);
    const cli: ChildProcessByStdio<null, Readable, Readable> = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'replay', path, '--open', '--port', '0'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    cli.stdout.on('data', (d: Buffer) => (output += d.toString()));
    cli.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => cli.on('exit', (code) => resolve(code)));
    cleanups.push(async () => {
      if (cli.exitCode === null) cli.kill('SIGKILL');
      await exited;
    });
    let url: string | undefined;
    for (let i = 0; i < 600 && url === undefined && cli.exitCode === null; i++) {
      url = /inspector page over the trace \(\d+ stops\): (http:\/\/127\.0\.0\.1:\d+\/)/.exec(output)?.[1];
      if (url === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, output).toBeDefined();
    expect(output).toContain('every decision agrees');

    const { stops, note } = (await (await fetch(`${url}scrub.json`)).json()) as {
      stops: { label: string }[];
      note: string;
    };
    expect(note).toContain('every decision agrees');
    const at404 = stops.findIndex((s) => /HTTP 404/.test(s.label));
    expect(at404).toBeGreaterThan(0);

    const browser = await launchChromium();
    cleanups.push(browser.close);
    const page = await browser.context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(url as string);
    const waitShown = (stop: number) =>
      page.waitForSelector(`#scrubber[data-shown-stop="${stop}"]`, { timeout: 15_000 });

    // It opens at the end of the trace: the session was lost, the call is outcome unknown.
    await waitShown(stops.length - 1);
    expect(await page.textContent('#status')).toBe('replay of a trace');
    expect(await page.textContent('#scrub-note')).toContain('every decision agrees');
    const end = await shown(page);
    expect(end.client).toBe('reinitializing');
    expect(end.streams).toContain('sessionTerminated');
    expect(end.unknown).toBeGreaterThanOrEqual(1);

    // The slider moved to the stop before the 404: the session active, no stream terminated, no ending yet.
    await page.locator('#scrub-range').fill(String(at404 - 1));
    await waitShown(at404 - 1);
    const before = await shown(page);
    expect(before.client).toBe('active');
    expect(before.streams).not.toContain('sessionTerminated');
    expect(before.streams.length).toBeGreaterThanOrEqual(2);
    expect(before.unknown).toBe(0);

    // One step on: the 404 itself. The stream took it as the session's end; the client has not heard yet.
    await page.click('#scrub-next');
    await waitShown(at404);
    const at = await shown(page);
    expect(at.at).toContain('HTTP 404');
    expect(at.streams.filter((s) => s === 'sessionTerminated')).toHaveLength(1);
    expect(at.client).toBe('active');
    expect(at.unknown).toBe(0);

    // Back to the very start: only the client machine, not yet initialized.
    await page.locator('#scrub-range').fill('0');
    await waitShown(0);
    expect(await shown(page)).toMatchObject({ client: 'uninitialized', streams: [], unknown: 0 });
    expect(errors).toEqual([]);

    // Ctrl-C ends the command; its exit code is the regression check's (0: every decision agrees).
    cli.kill('SIGINT');
    expect(await exited).toBe(0);
  }, 120_000);
});
