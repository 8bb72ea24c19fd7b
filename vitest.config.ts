import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'properties/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
  },
});
