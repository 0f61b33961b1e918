import type { LocalBatch } from '../batch/local-batch';
import type { TenantRound } from './tenant-round';

/** One of the batches the relay works on at once: the tenant round that claims it, the local batch it runs in. */
export interface RelayLane {
  round: TenantRound;
  local: LocalBatch;
  /** Its last visit was of a backlogged tenant: that batch's commit may still be in flight (see `laneOrder`). */
  backlogged: boolean;
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
 * The lanes in the order a round's visits take them (`runLanes` hands its first visits to its first lanes, and late
 * visits to the first lane waiting): a backlogged tenant's visit to a lane whose last visit was a backlogged
 * tenant's, the others to the other lanes, which come first for late visits too. A lane's batch sends its commit
 * only once the lane's previous commit is done: a tenant woken while a backlog drains, visited on a lane still
 * committing a backlogged batch, holds that lane until the commit is done, and the tenants woken after it wait for
 * the round's end (ADR 1106, addendum of 2026-12-06 "the delay in batches").
 */
export function laneOrder<L extends Pick<RelayLane, 'backlogged'>>(
  lanes: readonly L[],
  visits: readonly { backlog?: boolean }[],
): readonly L[] {
  // lanes all of one kind (none backlogged, as at a low rate) keep their order: no copies made for it
  if (lanes.every((lane) => lane.backlogged === lanes[0]!.backlogged)) return lanes;
  const heavy = lanes.filter((lane) => lane.backlogged);
  const light = lanes.filter((lane) => !lane.backlogged);
  const ordered: L[] = [];
  for (const visit of visits.slice(0, lanes.length)) {
    const [preferred, other] = visit.backlog ? [heavy, light] : [light, heavy];
    ordered.push((preferred.length > 0 ? preferred : other).shift()!);
  }
  return [...ordered, ...light, ...heavy];
}

/**
 * Visits that come while a round runs — tenants woken meanwhile — for a lane that has nothing left to do while
 * another lane still works (a backlogged tenant's batch): the woken tenant need not wait for the round's end
 * (ADR 1106). `take` hands the next one, if any; `nudge` tells waiting lanes to look again.
 */
export class LateVisits<V> {
  private signal = signalled();

  constructor(readonly take: () => V | undefined) {}

  /** Resolves at the next `nudge`. */
  get nudged(): Promise<void> {
    return this.signal.promise;
  }

  nudge(): void {
    this.signal.resolve();
    this.signal = signalled();
  }
}

function signalled(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((res) => (resolve = res));
  return { promise, resolve };
}

/**
 * Late visits a round may begin once its own visits are done, per lane (`runLanes`): the bound that keeps a stream
 * of wake-ups from holding the backlogged tenant's next batch (and the scan) up for more than that many small
 * visits. With one a lane, a tenant woken again while the last of them ran waited for the round's end: with the
 * planner's revisits after the scan, 1.3 % of a small tenant's events beside a backlog, against 0.3 % with two and
 * without them (ADR 1106, addendum "the last waits for a round's end").
 */
export const LATE_AFTER_OWN_PER_LANE = 2;

/**
 * Runs `visits` on `lanes` side by side: each lane takes the next visit once its last one is done; with `late`,
 * a lane that finds none left takes late visits while one of `visits` still runs, and once none does,
 * LATE_AFTER_OWN_PER_LANE more per lane (on whichever lane is free) while a visit still runs (ADR 1106). After a
 * failure no lane takes another; the first failure is thrown once every lane has stopped, so no visit of this round
 * is still running when the next round begins.
 */
export function runLanes<L, V>(
  lanes: readonly L[],
  visits: readonly V[],
  visit: (lane: L, next: V) => Promise<void>,
  late?: LateVisits<V>,
): Promise<void> {
  // the common case at a low rate — one visit — needs no lanes side by side, nor a promise of its own around the
  // visit's (an async function returning a promise adopts it: one more promise and two more turns, issue 35)
  if (!late && visits.length === 1 && lanes.length > 0) return visit(lanes[0]!, visits[0]!);
  return runSideBySide(lanes, visits, visit, late);
}

/** `runLanes` with more than one visit, none, or late ones. */
async function runSideBySide<L, V>(
  lanes: readonly L[],
  visits: readonly V[],
  visit: (lane: L, next: V) => Promise<void>,
  late?: LateVisits<V>,
): Promise<void> {
  if (visits.length === 0) return;
  let next = 0;
  let failed = false;
  // the round's own visits under way, and all its visits: late visits are taken while one of its own runs and,
  // once none does, LATE_AFTER_OWN_PER_LANE more per lane while a visit still runs, by whichever lane is free (a
  // tenant woken while the lane left free was busy waits for the first lane free, not for the round's end); so a
  // stream of wake-ups begins that many late visits at most after the round's own, and its backlogged tenant and the
  // scan come in the next round
  let own = 0;
  let running = 0;
  // late visits begun once none of the round's own ran, and how many may begin so
  let after = 0;
  const afterMax = LATE_AFTER_OWN_PER_LANE * lanes.length;
  const ended = await Promise.allSettled(
    lanes.map(async (lane) => {
      while (!failed) {
        const mine = next < visits.length;
        const open = own > 0 || (running > 0 && after < afterMax);
        const due = mine ? visits[next++] : open ? late?.take() : undefined;
        if (due === undefined) {
          if (!late || !open) return;
          await late.nudged;
          continue;
        }
        if (mine) own++;
        else if (own === 0) after++;
        running++;
        try {
          await visit(lane, due);
        } catch (error) {
          failed = true;
          throw error;
        } finally {
          if (mine) own--;
          running--;
          // a lane waiting for late visits looks again: it stops once nothing above lets it take one
          late?.nudge();
        }
      }
    }),
  );
  const failure = ended.find((e): e is PromiseRejectedResult => e.status === 'rejected');
  if (failure) throw failure.reason;
}
