import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, it } from 'vitest';
import { CURSOR_FILE_RULES, CursorStore as SimCursorStore } from '../../properties/world/cursor-file.js';
import { type CursorStore, FileCursorStore, MemoryCursorStore } from '../../src/client/cursor-store.js';
import { cursorStoreContract, registerContract } from '../../src/testing/index.js';

/** The cursor store contract (src/testing/contracts/cursor-store.ts) on every client cursor store. */

registerContract(
  { describe, it },
  'CursorStore contract: memory',
  cursorStoreContract({ create: () => new MemoryCursorStore() }),
);

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

registerContract(
  { describe, it },
  'CursorStore contract: file',
  cursorStoreContract({
    async create() {
      const dir = await mkdtemp(join(tmpdir(), 'mcpc-cursor-contract-'));
      dirs.push(dir);
      return new FileCursorStore(join(dir, 'cursor.json'));
    },
    reopen: (store) => new FileCursorStore(store.path),
  }),
);

/**
 * The 2025 world's cursor store (properties/world/cursor-file.ts): the record a simulated client process
 * persists. The world keeps the object across a process restart when durable, and a restarted process
 * reads it back as a file, through the runtime's checks; a reopen is a view of it.
 */
const simOf = new WeakMap<CursorStore, SimCursorStore>();
function simView(sim: SimCursorStore): CursorStore {
  const view: CursorStore = {
    durable: true,
    load: async () => sim.readBack(CURSOR_FILE_RULES),
    save: async (record) => {
      sim.record = record;
    },
  };
  simOf.set(view, sim);
  return view;
}

registerContract(
  { describe, it },
  'CursorStore contract: simulated (2025 world)',
  cursorStoreContract({
    create: () => simView(new SimCursorStore()),
    reopen: (view) => simView(simOf.get(view) as SimCursorStore),
  }),
);
