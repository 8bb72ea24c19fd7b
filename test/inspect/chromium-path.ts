/**
 * The chromium the browser test drives: `MCPC_CHROMIUM`, else Debian's, which `npm test`'s global setup
 * installs when it is missing (test/setup/provision.ts). Apart from chromium.ts so the setup reads it
 * without loading playwright.
 */
export const CHROMIUM = process.env.MCPC_CHROMIUM || '/usr/bin/chromium';
