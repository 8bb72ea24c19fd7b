/**
 * What the world draws while it runs (latency per message), so a schedule and its config replay exactly:
 * the same seeded generator the fault proxy and the store contracts use (machines/seeded-random.ts).
 */
export { seededRandom } from '../../machines/seeded-random.js';
