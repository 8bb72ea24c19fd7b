/**
 * The 2026-07-28 half of `mcp-continuity probe`: `server/discover`, and with a tool named read-only a cut
 * call and a keyed re-issue, as `ModernFacts` for machines/probe/modern-checks.ts.
 */
import { randomUUID } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  ContinuityMeta,
  withContinuityDeclared,
} from '../../../machines/continuity-extension.js';
import {
  type CutTry,
  continuityAdvertised,
  discoverResult,
  type ModernFacts,
} from '../../../machines/probe/modern-checks.js';
import type { ProbeOptions } from '../../../machines/probe/options.js';
import { exchangeDeadlineMs, type ProbeExchange } from '../../../machines/probe/schedule.js';
import { answered, lastEventId } from '../../../machines/probe/wire.js';
import {
  encodeMcpName,
  MODERN_PROTOCOL_VERSION,
  PROTOCOL_VERSION_META_KEY,
} from '../../../machines/server/era.js';
import { exchange } from './http.js';

/** A tool name no server has: the key-reuse check sends it, so nothing of the user's can run. */
export const NO_SUCH_TOOL = 'mcp-continuity-probe-no-such-tool';

/**
 * Runs the MCP 2026-07-28 part of the probe: `server/discover`, then (only with a tool named read-only)
 * a cut call and, where the continuity extension is advertised, a keyed re-issue. What the answers mean
 * is decided in machines/probe/modern-checks.ts.
 */
export async function gatherModern(o: ProbeOptions): Promise<ModernFacts> {
  const send = (
    id: string,
    method: string,
    params: Record<string, unknown>,
    meta: Record<string, unknown>,
    kind: ProbeExchange = 'request',
  ) => {
    const name: Record<string, string> =
      typeof params.name === 'string' ? { 'mcp-name': encodeMcpName(params.name) } : {};
    return exchange(
      o.url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': MODERN_PROTOCOL_VERSION,
          'mcp-method': method,
          ...name,
          ...o.headers,
        },
        body: {
          jsonrpc: '2.0',
          id,
          method,
          params: {
            ...params,
            _meta: {
              [PROTOCOL_VERSION_META_KEY]: MODERN_PROTOCOL_VERSION,
              [CLIENT_CAPABILITIES_META_KEY]: {},
              'io.modelcontextprotocol/clientInfo': { name: 'mcp-continuity-probe', version: '1' },
              ...meta,
            },
          },
        },
      },
      { timeoutMs: exchangeDeadlineMs(o, kind), maxBytes: o.maxBytes, until: answered(id) },
    );
  };

  const discoverId = 'probe-discover';
  const discover = await send(discoverId, 'server/discover', {}, {});
  const facts: { -readonly [K in keyof ModernFacts]: ModernFacts[K] } = { discover, discoverId };
  const result = discoverResult(facts);
  if (!result) return facts;
  if (!o.tool?.readOnly) {
    facts.cutSkipped = o.tool
      ? `--tool ${o.tool.name} was not said to be read-only (--read-only): the probe does not cut and re-send it`
      : 'needs a tool the probe may call twice: --tool NAME --args JSON --read-only';
    facts.keyedSkipped = facts.cutSkipped;
    return facts;
  }
  const call = { name: o.tool.name, arguments: o.tool.args };
  const cutCall = async (
    meta: Record<string, unknown>,
    reissueMeta: (cut: Awaited<ReturnType<typeof send>>) => Record<string, unknown>,
  ): Promise<CutTry> => {
    const cut = await send(`probe-cut-${randomUUID()}`, 'tools/call', call, meta, 'cut');
    const reissueId = `probe-reissue-${randomUUID()}`;
    return {
      cutAfterMs: o.cutAfterMs,
      cut,
      reissueId,
      reissue: await send(reissueId, 'tools/call', call, reissueMeta(cut)),
    };
  };
  facts.cut = await cutCall({}, () => ({}));

  if (!continuityAdvertised(result)) {
    facts.keyedSkipped = 'the continuity extension is not advertised';
    return facts;
  }
  const key = randomUUID();
  const declared = { [CLIENT_CAPABILITIES_META_KEY]: withContinuityDeclared({}) };
  let last: string | null = null;
  const tried = await cutCall({ ...declared, [ContinuityMeta.idempotencyKey]: key }, (cut) => {
    last = lastEventId(cut) ?? null;
    return { ...declared, [ContinuityMeta.idempotencyKey]: key, [ContinuityMeta.lastEventId]: last };
  });
  const reuseId = `probe-reuse-${randomUUID()}`;
  const reuse = await send(
    reuseId,
    'tools/call',
    { name: NO_SUCH_TOOL, arguments: {} },
    {
      ...declared,
      [ContinuityMeta.idempotencyKey]: key,
    },
  );
  facts.keyed = { ...tried, lastEventId: last, reuse, reuseId };
  return facts;
}
