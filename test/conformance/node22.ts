import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Where `npm test`'s global setup (test/setup/provision.ts) installs the `node` npm package. */
export const NODE22_CACHE_DIR = fileURLToPath(new URL('../../.cache/node22', import.meta.url));

/**
 * The Node 22 binary the conformance CLI needs (it does not run on the Node 20 the project is built and
 * tested with), or undefined. In order: `MCP_CONFORMANCE_NODE`; `.cache/node22`, where the test setup
 * installs the `node` npm package outside the project's dependencies (as a dependency it would put Node 22
 * first on every npm script's PATH, and better-sqlite3 is built for Node 20); `/opt/node22`, a local
 * install for development.
 */
export function locateNode22(): string | undefined {
  const candidates = [
    process.env.MCP_CONFORMANCE_NODE,
    `${NODE22_CACHE_DIR}/node_modules/.bin/node`,
    '/opt/node22/node_modules/.bin/node',
  ];
  return candidates.find((c): c is string => c !== undefined && c !== '' && existsSync(c));
}

/** {@link locateNode22}, or a clear error when there is none. */
export function findNode22(): string {
  const found = locateNode22();
  if (!found) {
    throw new Error(
      'Node 22 not found for the conformance CLI: `npm test` installs it into .cache/node22 ' +
        '(test/setup/provision.ts), or set MCP_CONFORMANCE_NODE',
    );
  }
  return found;
}
