import type { AnyStateMachine } from 'xstate';

/**
 * Every machine of the core, by the name its generated diagram is filed under (`docs/machines/<name>.md`).
 * Adding a machine here is all it takes for `npm run docs` to draw it and for the staleness test to guard it.
 */
export const machineCatalog: Record<string, AnyStateMachine> = {};
