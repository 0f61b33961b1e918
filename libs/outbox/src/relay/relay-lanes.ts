import type { DueTenant } from './due-tenant-planner';
import type { LocalBatch } from '../batch/local-batch';
import type { TenantRound } from './tenant-round';

/** One of the batches the relay works on at once: the tenant round that claims it, the local batch it runs in. */
export interface RelayLane {
  round: TenantRound;
  local: LocalBatch;
}

/** The smallest pool on which `relay.concurrency: 'auto'` runs two batches at once. */
const AUTO_TWO_FROM_POOL = 8;

/**
 * How many batches the relay works on at once (see `relay.concurrency`): the option's number, or for `'auto'`
 * two when the DataSource's pool has room for them and the app (each batch may hold two connections, its
 * commit and the next claim), one below.
 */
export function laneCount(concurrency: number | 'auto', poolSize: () => number): number {
  if (concurrency !== 'auto') return concurrency;
  return poolSize() >= AUTO_TWO_FROM_POOL ? 2 : 1;
}

/**
 * A round's visits, in the planner's order: a tenant with a backlog once per lane, next to each other, so that
 * several batches claim from it at once; every other tenant once.
 */
export function visitsOf(tenants: readonly DueTenant[], lanes: number): DueTenant[] {
  return tenants.flatMap((due) => (due.backlog ? Array.from({ length: lanes }, () => due) : [due]));
}

/**
 * Runs `visits` on `lanes` side by side: each lane takes the next visit once its last one is done. After a
 * failure no lane takes another; the first failure is thrown once every lane has stopped, so no visit of
 * this round is still running when the next round begins.
 */
export async function runLanes<L, V>(
  lanes: readonly L[],
  visits: readonly V[],
  visit: (lane: L, next: V) => Promise<void>,
): Promise<void> {
  // the common case at a low rate — one visit, or none — needs no lanes side by side
  if (visits.length === 0) return;
  if (visits.length === 1 && lanes.length > 0) return visit(lanes[0]!, visits[0]!);
  let next = 0;
  let failed = false;
  const ended = await Promise.allSettled(
    lanes.map(async (lane) => {
      while (!failed && next < visits.length) {
        try {
          await visit(lane, visits[next++]!);
        } catch (error) {
          failed = true;
          throw error;
        }
      }
    }),
  );
  const failure = ended.find((e): e is PromiseRejectedResult => e.status === 'rejected');
  if (failure) throw failure.reason;
}
