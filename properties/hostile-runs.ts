import { spawnSync } from 'node:child_process';

/**
 * The hostile-input suites at a longer budget than CI gives them: raw HTTP requests against a running
 * server, 2025 and 2026-07-28 (`MCPC_FUZZ_RUNS` batches each), and a generated hostile server against the real client machines
 * (`MCPC_HOSTILE_RUNS` runs), and generated hostile 2026 servers over loopback against `continuityFetch`
 * (`MCPC_HOSTILE_MODERN_RUNS` runs). They are vitest files because they drive real sockets; this runs them as
 * they run in CI, only longer, and says whether they held.
 */
export function runHostile(options: {
  readonly serverBatches: number;
  readonly clientRuns: number;
}): boolean {
  const files = [
    'test/server/hostile-input.property.test.ts',
    'test/modern/server-hostile.property.test.ts',
    'test/client/hostile-server.property.test.ts',
    'test/client/modern-hostile.property.test.ts',
  ];
  console.log(
    `hostile input: ${options.serverBatches} batches of raw requests against the server, ` +
      `${options.clientRuns} generated hostile servers against the client`,
  );
  const run = spawnSync('npx', ['vitest', 'run', ...files], {
    stdio: 'inherit',
    env: {
      ...process.env,
      MCPC_FUZZ_RUNS: String(options.serverBatches),
      MCPC_HOSTILE_RUNS: String(options.clientRuns),
      MCPC_HOSTILE_MODERN_RUNS: String(options.clientRuns),
    },
  });
  return run.status === 0;
}
