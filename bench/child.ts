/**
 * Runs one benchmark task in this process and prints its result as one JSON line prefixed `BENCH_RESULT `.
 * `bench/run.ts` starts one of these per task (`node --expose-gc --import tsx bench/child.ts <task> <json>`),
 * so every measurement starts from a fresh heap and JIT. Run it by hand to profile one task:
 *
 *   node --expose-gc --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/child.ts notify '{"server":"ours","client":"ours","count":100000}'
 */
import { TASKS } from './tasks.js';

const [name, json] = process.argv.slice(2);
const task = name === undefined ? undefined : TASKS[name];
if (!task) {
  console.error(`unknown task ${name}; one of: ${Object.keys(TASKS).join(', ')}`);
  process.exit(2);
}
const unhandled: string[] = [];
process.on('unhandledRejection', (reason) => {
  unhandled.push(reason instanceof Error ? reason.message : String(reason));
});
try {
  const result = await task(JSON.parse(json ?? '{}') as Record<string, unknown>);
  process.stdout.write(`BENCH_RESULT ${JSON.stringify({ ok: true, result, unhandled })}\n`);
  process.exit(0);
} catch (error) {
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stdout.write(`BENCH_RESULT ${JSON.stringify({ ok: false, error: message, unhandled })}\n`);
  process.exit(1);
}
