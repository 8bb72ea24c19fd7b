import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { launchChromium } from './chromium.js';

/**
 * `npm start` in a real browser: the demo (CLI, as `npm start` runs it) serves the inspector page, chromium
 * opens it, and the states drawn on the page follow the faults the demo injects. Every state any card
 * shows is recorded by a MutationObserver installed before the page's own script runs, so a state that
 * lasted 100 ms is seen without polling at the right moment.
 */
interface Seen {
  id: string;
  machine: string;
  state: string;
  t: number;
  /** Stream cards: what the card says of the stream when it shows this state. */
  stream?: { key: string; kind: string; attempt: string | undefined };
}

/** Text or an attribute the page showed with "undefined" (or "NaN", "null") in it, and where. */
interface Leak {
  where: string;
  text: string;
}

/**
 * Records every moment the page shows a value it could not read: "undefined", "NaN" or "null" in the text
 * of anything added to the body, or in any attribute set on it. Checked for the whole run, not only at its end.
 */
function recordLeaks(): void {
  const w = window as unknown as { __leaks: Leak[] };
  w.__leaks = [];
  const BAD = /\b(undefined|NaN|null)\b/;
  const where = (el: Element | null) =>
    el
      ? `${el.tagName.toLowerCase()}${el.className ? `.${String(el.className).split(' ').join('.')}` : ''}`
      : '?';
  const leak = (el: Element | null, text: string) => {
    if (w.__leaks.length < 20) w.__leaks.push({ where: where(el), text: text.slice(0, 200) });
  };
  const checkElement = (el: Element) => {
    if (el.closest('script, style')) return;
    for (const attr of el.attributes) if (BAD.test(attr.value)) leak(el, `${attr.name}="${attr.value}"`);
    for (const child of el.querySelectorAll('*')) {
      for (const attr of child.attributes)
        if (BAD.test(attr.value)) leak(child, `${attr.name}="${attr.value}"`);
    }
    if (BAD.test(el.textContent ?? '')) leak(el, el.textContent ?? '');
  };
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      if (!document.body?.contains(m.target)) continue;
      if (m.type === 'attributes' && m.attributeName) {
        const value = (m.target as Element).getAttribute(m.attributeName) ?? '';
        if (BAD.test(value)) leak(m.target as Element, `${m.attributeName}="${value}"`);
      }
      if (m.type === 'characterData' && BAD.test(m.target.textContent ?? ''))
        leak(m.target.parentElement, m.target.textContent ?? '');
      for (const node of m.addedNodes) {
        if (node instanceof Element) checkElement(node);
        else if (node.nodeType === Node.TEXT_NODE && BAD.test(node.textContent ?? ''))
          leak(node.parentElement, node.textContent ?? '');
      }
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
}

/** What the page shows now, read as a person would (every text and attribute of the body), with no leaks. */
function leaksNow(): Leak[] {
  const BAD = /\b(undefined|NaN|null)\b/;
  const out: Leak[] = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('script, style')) continue;
    for (const attr of el.attributes)
      if (BAD.test(attr.value)) out.push({ where: el.tagName, text: attr.value });
    for (const node of el.childNodes) {
      if (node.nodeType === Node.TEXT_NODE && BAD.test(node.textContent ?? ''))
        out.push({ where: el.tagName, text: node.textContent ?? '' });
    }
  }
  return out;
}

/** The first 2026 call group on the page, read as its cards show it. */
function modernOnPage() {
  const group = document.querySelector('.session-group[data-idempotency-key]');
  const call = group?.querySelector('.actor[data-machine="modernCall"]');
  const keyed = [...(group?.querySelectorAll('.actor[data-machine="keyedRequest"]') ?? [])];
  return {
    attempts: [...(call?.querySelectorAll('tr[data-attempt]') ?? [])].map((tr) => ({
      id: tr.getAttribute('data-attempt-id') ?? '',
      decision: tr.getAttribute('data-decision') ?? '',
      bytes: tr.children[5]?.textContent ?? '',
    })),
    executions: keyed.map((k) =>
      Number(k.querySelector('[data-executions]')?.getAttribute('data-executions')),
    ),
    serverAttempts: keyed.flatMap((k) =>
      [...k.querySelectorAll('tr[data-attempt-id]')].map((tr) => tr.getAttribute('data-attempt-id') ?? ''),
    ),
  };
}

const ARTIFACT = resolve('artifacts/inspector.png');
const LIVE_ARTIFACT = resolve('artifacts/inspector-live.png');

function recordStates(): void {
  const w = window as unknown as { __seen: Seen[]; __last: Record<string, string> };
  w.__seen = [];
  w.__last = {};
  const record = (el: Element) => {
    const id = el.getAttribute('data-actor-id');
    const state = el.getAttribute('data-state');
    if (!id || state === null || w.__last[id] === state) return;
    w.__last[id] = state;
    const machine = el.getAttribute('data-machine') ?? '';
    const seen: Seen = { id, machine, state, t: performance.now() };
    // Observer callbacks run after the page's render, so the card's facts are those of this state.
    if (machine === 'stream') {
      const facts = [...el.querySelectorAll('dl.facts dt')];
      const attempt = facts.find((dt) => dt.textContent === 'attempt')?.nextElementSibling?.textContent;
      seen.stream = {
        key: el.getAttribute('data-stream-key') ?? '',
        kind: el.getAttribute('data-stream-kind') ?? '',
        attempt: attempt ?? undefined,
      };
    }
    w.__seen.push(seen);
  };
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      if (m.type === 'attributes') record(m.target as Element);
      for (const node of m.addedNodes) {
        if (!(node instanceof Element)) continue;
        if (node.matches('[data-state]')) record(node);
        for (const el of node.querySelectorAll('[data-state]')) record(el);
      }
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
}

/**
 * A stream that went to backoff once the session was active, and later connected again: [backoff time,
 * back time]. (Under load the balancer may also cut the initialize POST, before the session is active.)
 */
function backoffAndBack(seen: Seen[]): [number, number] | undefined {
  const active = seen.find((s) => s.machine === 'client' && s.state === 'active');
  if (!active) return undefined;
  for (const s of seen) {
    if (s.machine !== 'stream' || s.state !== 'backoff' || s.t < active.t) continue;
    const back = seen.find((b) => b.id === s.id && b.t > s.t && b.state.startsWith('connecting'));
    if (back) return [s.t, back.t];
  }
  return undefined;
}

describe('the inspector page in chromium during `npm start`', () => {
  let demo: ChildProcessByStdio<null, Readable, Readable> | undefined;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  let output = '';

  afterAll(async () => {
    await browser?.close();
    if (demo && demo.exitCode === null) {
      const exited = new Promise((r) => demo?.once('exit', r));
      demo.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (demo.exitCode === null) demo.kill('SIGKILL');
    }
  });

  const waitForOutput = (pattern: RegExp, timeoutMs: number) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(output);
        if (!match) return false;
        clearTimeout(timer);
        demo?.stdout.off('data', check);
        resolve(match);
        return true;
      };
      const timer = setTimeout(() => {
        demo?.stdout.off('data', check);
        reject(new Error(`no ${pattern} in the demo's output within ${timeoutMs} ms:\n${output}`));
      }, timeoutMs);
      if (!check()) demo?.stdout.on('data', check);
    });

  it('shows a stream going to backoff and back while the session stays active, and the gap; the 2026 call', async () => {
    demo = spawn(
      process.execPath,
      ['--import', 'tsx', 'src/cli/main.ts', 'demo', '--wait-for-page', '--hold'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    demo.stdout.setEncoding('utf8');
    demo.stdout.on('data', (chunk: string) => {
      output += chunk;
    });
    demo.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const url = (await waitForOutput(/inspector: (http:\/\/127\.0\.0\.1:\d+\/)/, 30_000))[1] as string;

    browser = await launchChromium();
    const page: Page = browser.context.pages()[0] ?? (await browser.context.newPage());
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    await page.addInitScript(recordStates);
    await page.addInitScript(recordLeaks);
    await page.addInitScript({ content: `window.__backoffAndBack = ${backoffAndBack.toString()};` });
    await page.goto(url);

    // The demo starts once the page is connected; its faults must show up on the page.
    await page.waitForFunction(
      () => {
        const w = window as unknown as { __seen: Seen[]; __backoffAndBack: typeof backoffAndBack };
        return w.__backoffAndBack(w.__seen) !== undefined;
      },
      undefined,
      { timeout: 45_000, polling: 100 },
    );
    await mkdir(resolve('artifacts'), { recursive: true });
    await page.screenshot({ path: LIVE_ARTIFACT, fullPage: true }); // mid-run: streams resuming
    await page.waitForSelector('#marker-list .marker.gap', { timeout: 45_000 });
    await waitForOutput(/All guarantees held\./, 60_000);
    // The feed sends its last snapshots and figures when the demo ends.
    await page.waitForSelector('.actor[data-machine="client"][data-state="closed"]', { timeout: 10_000 });

    // Part 3, MCP 2026-07-28: the call's attempts, and beside them, under the same idempotency key, the
    // server's keyed request with its one execution.
    await page.waitForSelector(
      '.session-group[data-idempotency-key] .actor[data-machine="modernCall"][data-state="answered"]',
      { timeout: 10_000 },
    );
    await page.waitForSelector('.session-group[data-idempotency-key] .actor[data-machine="keyedRequest"]', {
      timeout: 10_000,
    });
    const modern = await page.evaluate(modernOnPage);
    const reissues = Number((/(\d+) re-issues, all with the same key/.exec(output) ?? [])[1]);
    expect(reissues).toBeGreaterThan(0);
    // One row per attempt the client made, as the demo counted them on the wire.
    expect(modern.attempts.length).toBe(reissues + 1);
    expect(modern.attempts.slice(0, -1).every((a) => /reissue$/.test(a.decision))).toBe(true);
    expect(modern.attempts.at(-1)?.decision).toBe('deliver');
    expect(modern.attempts.every((a) => /^\d+$/.test(a.bytes))).toBe(true);
    expect(new Set(modern.attempts.map((a) => a.id)).size).toBe(modern.attempts.length);
    // The one charge: one body started for the key, and every attempt the server saw is one of the call's.
    expect(modern.executions.reduce((n, e) => n + e, 0)).toBe(1);
    expect(modern.serverAttempts.length).toBeGreaterThanOrEqual(2);
    const clientIds = new Set(modern.attempts.map((a) => a.id));
    expect(modern.serverAttempts.every((id) => clientIds.has(id))).toBe(true);

    const seen = await page.evaluate(() => (window as unknown as { __seen: Seen[] }).__seen);
    // Every state the page showed, in order: the first thing to read when this test fails.
    await writeFile(resolve('artifacts/inspector-states.json'), JSON.stringify(seen, null, 1));
    const bounce = backoffAndBack(seen);
    expect(bounce).toBeDefined();
    const [, backAt] = bounce as [number, number];

    // The session region did not move while its stream backed off: active throughout, closed at the end.
    const client = seen.filter((s) => s.machine === 'client');
    expect(new Set(client.map((s) => s.id)).size).toBe(1);
    const activeAt = client.find((s) => s.state === 'active')?.t;
    expect(activeAt).toBeDefined();
    const afterActive = client.filter((s) => s.t >= (activeAt as number)).map((s) => s.state);
    expect(afterActive).toEqual(['active', 'closed']);
    const closedAt = client.find((s) => s.state === 'closed')?.t as number;
    expect(backAt).toBeLessThan(closedAt);

    // Every stream card said what kind of stream it is and how many attempts it has made, of how many.
    const streams = seen.filter((s) => s.machine === 'stream');
    expect(streams.length).toBeGreaterThan(0);
    for (const s of streams) {
      const card = s.stream;
      expect(card, s.id).toBeDefined();
      expect(card?.key, s.id).toMatch(/\S/);
      expect(['request', 'standalone', 'message'], `${s.id}: ${card?.kind}`).toContain(card?.kind);
      expect(card?.attempt, `${s.id} (${card?.kind})`).toMatch(
        card?.kind === 'standalone' ? /^\d+$/ : /^\d+ of \d+$/,
      );
    }
    const kinds = new Set(streams.map((s) => s.stream?.kind));
    expect(kinds.has('request') && kinds.has('standalone')).toBe(true);
    // Nothing the page showed during the run, nor shows now, read "undefined", "NaN" or "null".
    expect(await page.evaluate(() => (window as unknown as { __leaks: Leak[] }).__leaks)).toEqual([]);
    expect(await page.evaluate(leaksNow)).toEqual([]);

    const gap = await page.locator('#marker-list .marker.gap').first().textContent();
    expect(gap).toMatch(/gap on .+: \d+ events lost \(resume_window_exceeded\)/);
    // The client and the server machine of the same Mcp-Session-Id are drawn side by side.
    const grouped = await page.evaluate(() => {
      const group = document.querySelector('.actor[data-machine="client"]')?.closest('.session-group');
      return Boolean(group?.querySelector('.actor[data-machine="serverSession"]'));
    });
    expect(grouped).toBe(true);
    // The metrics figures, live from the same feed.
    const gaps = await page.locator('#figure-tables tr[data-figure$=".gaps"] td.num').first().textContent();
    expect(Number(gaps)).toBeGreaterThanOrEqual(1);
    expect(pageErrors).toEqual([]);

    await page.screenshot({ path: ARTIFACT, fullPage: true });
    console.log(`inspector screenshots: ${LIVE_ARTIFACT} (during the demo), ${ARTIFACT} (at its end)`);

    // A page opened after the gap happened gets it from the replay: the marker, and the session's badge.
    const late = await browser.context.newPage();
    const lateErrors: string[] = [];
    late.on('pageerror', (e) => lateErrors.push(e.message));
    await late.goto(url);
    await late.waitForSelector('.actor[data-machine="client"][data-state="closed"]', { timeout: 10_000 });
    await late.waitForSelector('#marker-list .marker.gap', { timeout: 10_000 });
    const badge = late.locator('.session-group .badge.gap');
    await badge.first().waitFor({ timeout: 10_000 });
    expect(await badge.first().textContent()).toMatch(/^\d+ gaps?$/);
    const badgeGroup = await badge
      .first()
      .evaluate(
        (el) => el.closest('.session-group')?.querySelector('.actor[data-machine="client"]') !== null,
      );
    expect(badgeGroup).toBe(true);
    expect(await late.evaluate(leaksNow)).toEqual([]);
    expect(lateErrors).toEqual([]);
  }, 120_000);
});
