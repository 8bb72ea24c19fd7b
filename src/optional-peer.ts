/**
 * The transport needs none of these; the demo and the inspector do. They are optional
 * peer dependencies, loaded only when one of those parts runs, so installing the transport does not pull
 * them in, and a missing one is named with the command that installs it.
 */
export const OPTIONAL_PEERS = {
  '@modelcontextprotocol/client': "the demo's 2026-07-28 part (mcp-continuity demo)",
  '@modelcontextprotocol/server': 'the 2026-07-28 endpoint (createContinuityServer({ modern }))',
  ws: 'the inspector (startInspectorServer, createInspectorFeed, mcp-continuity inspect)',
  zod: 'the demo (mcp-continuity demo)',
} as const;
export type OptionalPeer = keyof typeof OPTIONAL_PEERS;

/** Thrown (or, from a feed that must not throw, warned) when an optional peer dependency is not installed. */
export class MissingPeerError extends Error {
  constructor(readonly peer: OptionalPeer) {
    super(
      `${OPTIONAL_PEERS[peer]} needs the package "${peer}", an optional peer dependency of mcp-continuity: ` +
        `npm install ${peer}`,
    );
    this.name = 'MissingPeerError';
  }
}

/** Which optional peer a failed import was missing, if that is why it failed (Node's ESM resolver message). */
function missingPeerOf(error: unknown): OptionalPeer | undefined {
  const e = error as { code?: unknown; message?: unknown };
  if (e?.code !== 'ERR_MODULE_NOT_FOUND' || typeof e.message !== 'string') return undefined;
  const name = /Cannot find package '([^']+)'/.exec(e.message)?.[1];
  return name !== undefined && Object.hasOwn(OPTIONAL_PEERS, name) ? (name as OptionalPeer) : undefined;
}

/**
 * Runs `load` (a dynamic import of the peer, or of a module that imports it); a missing optional peer
 * becomes a {@link MissingPeerError}. Any other failure is rethrown as it is.
 */
export async function loadOptional<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const peer = missingPeerOf(error);
    throw peer ? new MissingPeerError(peer) : error;
  }
}
