/**
 * The cards part 3 of the demo charges, apart from part 3's code: that code imports the official v2 SDK
 * (optional peers), and the demo's summary names these cards whether or not part 3 could run.
 */
/** (a) The official v2 client alone. */
export const OFFICIAL_KEY = 'card-2026-a';
/** (b) The same client with `continuityFetch()` and the continuity extension. */
export const CONTINUITY_KEY = 'card-2026-b';
