/**
 * The oldest pending reading of the health check, the metrics gauge and the doctor, from its reader's positions
 * (`../pending-age-readings.ts`), as `{ text, values }`.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * Where a reader's next `oldestPendingAge` starts (migration OutboxOldestPendingFromPositions1764504200000): each
 * tenant's position in `seq` order and the previous reading's candidates, as the last reading returned them.
 */
export interface PendingAgePositions {
  tenants: string[];
  positions: string[];
  candidates: string[] | null;
  xmax: string | null;
  holders: string[];
  server: string | null;
}

/** No positions: every tenant from its first pending entry, as the one-argument form reads them. */
export const NO_PENDING_AGE_POSITIONS: PendingAgePositions = {
  tenants: [],
  positions: [],
  candidates: null,
  xmax: null,
  holders: [],
  server: null,
};

/** What `oldestPendingAge` returns: the age, and the positions for the next reading. */
export interface OldestPendingAgeRow extends PendingAgePositions {
  seconds: number;
}

/**
 * Age in seconds of the oldest work not done, across tenants, leaving out consumers orphaned for `orphanAfterMs`;
 * each tenant's pending events read from `from` (see `PendingAgeReadings`), and the positions for the next reading.
 */
export function oldestPendingAge(
  n: OutboxNames,
  orphanAfterMs: number,
  from: PendingAgePositions = NO_PENDING_AGE_POSITIONS,
): SqlStatement {
  return {
    text: `select r.seconds, r.tenants, r.positions::text[], r.candidates::text[], r.xmax::text, r.holders, r.server
             from ${n.oldestPendingAge}($1 * interval '1 millisecond', $2::uuid[], $3::bigint[], $4::bigint[],
                                        $5::xid8, $6::text[], $7::text) r`,
    values: [
      orphanAfterMs,
      from.tenants,
      from.positions,
      from.candidates,
      from.xmax,
      from.holders,
      from.server,
    ],
  };
}
