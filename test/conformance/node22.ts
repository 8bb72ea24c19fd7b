import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The Node 22 binary the conformance CLI needs (it does not run on the Node 20 the project is built and
 * tested with). In order: `MCP_CONFORMANCE_NODE`; `.cache/node22`, where `.ci/run` installs the `node` npm
 * package outside the project's dependencies (as a dependency it would put Node 22 first on every npm
 * script's PATH, and better-sqlite3 is built for Node 20); `/opt/node22`, a local install for development.
 */
export function findNode22(): string {
  const candidates = [
    process.env.MCP_CONFORMANCE_NODE,
    fileURLToPath(new URL('../../.cache/node22/node_modules/.bin/node', import.meta.url)),
    '/opt/node22/node_modules/.bin/node',
  ];
  const found = candidates.find((c): c is string => c !== undefined && c !== '' && existsSync(c));
  if (!found) {
    throw new Error(
      'Node 22 not found for the conformance CLI: run `npm install --no-save --prefix .cache/node22 node@22` (as .ci/run does) or set MCP_CONFORMANCE_NODE',
    );
  }
  return found;
}
