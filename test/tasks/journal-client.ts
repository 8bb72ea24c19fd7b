import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { continuityFetch } from '../../src/client/modern/continuity-fetch.js';
import { FileTaskJournal } from '../../src/client/modern/task-journal.js';
import { resumeTasks } from '../../src/client/modern/tasks-follow.js';

/**
 * A client process for the kill -9 tests (tasks-journal-http.test.ts): the official v2 `Client` on
 * `continuityFetch({ tasks: { journal: FileTaskJournal } })` calls `charge` once and prints what it
 * learns, one JSON line each: `{ "sending": true }` as `callTool` is called, `{ "task": id }` when the
 * handle arrives, `{ "result": ... }` or `{ "error": ... }` at the end.
 * With `resume` as the fifth argument it makes no call: `resumeTasks` re-attaches to what the journal
 * holds for the URL and prints `{ "resumed": ... }`.
 * Usage: journal-client.ts <url> <journal file> <amount> <ms> [resume]
 */
const [url, journalPath, amount, ms, mode] = process.argv.slice(2);
const say = (line: unknown) => process.stdout.write(`${JSON.stringify(line)}\n`);
const policy = { minPollMs: 20, retryDelayMs: 20, maxPollMs: 200, requestTimeoutMs: 5_000 };
const headers = { authorization: 'Bearer alice' };

if (mode === 'resume') {
  const resumed = await resumeTasks(String(url), {
    journal: new FileTaskJournal(String(journalPath)),
    policy,
    headers,
  });
  say({ resumed });
  process.exit(0);
}

const client = new Client(
  { name: 'journal-client', version: '1.0.0' },
  { versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
// The balancer may cut the connect's own requests: tried again, a bounded number of times.
for (let i = 0; ; i++) {
  try {
    await client.connect(
      new StreamableHTTPClientTransport(new URL(String(url)), {
        fetch: continuityFetch({
          tasks: {
            journal: new FileTaskJournal(String(journalPath)),
            policy,
            onTask: ({ taskId }) => say({ task: taskId }),
          },
        }),
        requestInit: { headers },
      }),
      // A request the balancer leaves hanging is given up after 5 s and the connect tried again.
      { timeout: 5_000 },
    );
    break;
  } catch (error) {
    if (i >= 20) throw error;
  }
}
say({ sending: true });
try {
  const result = await client.callTool(
    { name: 'charge', arguments: { amount: Number(amount), ms: Number(ms) } },
    { timeout: 30_000 },
  );
  say({ result });
} catch (error) {
  say({ error: { message: (error as Error).message, code: (error as { code?: unknown }).code } });
}
await client.close();
