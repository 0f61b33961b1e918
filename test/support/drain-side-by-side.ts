import type { TestApp } from './build-app';

/**
 * Drains with several relays at once, each until three rounds in a row find nothing, and returns how many
 * deliveries each one completed (in the order of `apps`).
 */
export function drainSideBySide(apps: readonly TestApp[]): Promise<number[]> {
  return Promise.all(
    apps.map(async (t) => {
      let succeeded = 0;
      for (let idle = 0; idle < 3;) {
        const round = await t.relay.drain();
        succeeded += round.succeeded;
        idle = round.deliveriesClaimed === 0 ? idle + 1 : 0;
      }
      return succeeded;
    }),
  );
}
