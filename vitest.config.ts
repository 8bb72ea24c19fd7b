import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'properties/**/*.test.ts'],
    // Installs what the suite needs beyond `npm ci` (Node 22, redis-server, chromium), or stops with the
    // command to run: `npm ci && npm test` on a fresh machine is all it takes.
    globalSetup: ['test/setup/provision.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});
