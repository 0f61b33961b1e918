/**
 * The Chromium that `npm run test:set-up` installs (tools/test-set-up/test-requirements.ts) and how it is
 * launched headless: the board's browser test drives it, the bench renders its plots with it.
 */

/** Where Debian's chromium package puts the browser. */
export const CHROMIUM_PATH = '/usr/bin/chromium';

/** Headless, no sandbox (root in CI), nothing fetched from the network. */
export const CHROMIUM_ARGS: readonly string[] = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
  '--disable-quic',
];
