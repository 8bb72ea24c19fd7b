import { loadOptional, MissingPeerError } from '../optional-peer.js';

/** The optional peers part 3 of the demo (MCP 2026-07-28) needs, at the versions the package declares. */
export const MODERN_PART_PEERS = {
  '@modelcontextprotocol/server': '2.4.0',
  '@modelcontextprotocol/client': '2.4.0',
} as const;

/** The one command that lets part 3 run, printed when it cannot. */
export const MODERN_PART_INSTALL = `npm install ${Object.entries(MODERN_PART_PEERS)
  .map(([name, version]) => `${name}@${version}`)
  .join(' ')}`;

export type ModernPart = typeof import('./part-modern.js') & typeof import('./demo-server-modern.js');

/**
 * Part 3's modules, or undefined when a peer it needs is not installed: the demo then runs parts 1 and 2 (the
 * 2025 protocol needs only the required peer) and says how to enable part 3. Any other failure is thrown.
 */
export async function loadModernPart(): Promise<ModernPart | undefined> {
  try {
    const [part, server] = await Promise.all([
      loadOptional(() => import('./part-modern.js')),
      loadOptional(() => import('./demo-server-modern.js')),
    ]);
    return { ...part, ...server };
  } catch (error) {
    if (error instanceof MissingPeerError && Object.hasOwn(MODERN_PART_PEERS, error.peer)) return undefined;
    throw error;
  }
}
