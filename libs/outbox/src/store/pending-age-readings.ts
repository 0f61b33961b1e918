import type { OutboxNames } from '../model/table-names';
import {
  NO_PENDING_AGE_POSITIONS,
  oldestPendingAge,
  type OldestPendingAgeRow,
  type PendingAgePositions,
} from './sql/pending-age';
import type { SqlStatement } from './sql/statement';

/**
 * One reader's positions for `outbox_oldest_pending_age` (ADR 1206, addendum "The oldest pending reading starts past
 * the settled"), per instance of the health check, the metrics or the admin service: each reading starts where the
 * previous ones proved that nothing is pending below, so that it does not walk the index entries a held snapshot
 * keeps for every event settled since it began. The database proves the positions (they never pass an event that
 * may still become pending): the answer is the one-argument form's. A reader's first reading walks from each
 * tenant's start, as before.
 */
export class PendingAgeReadings {
  private from: PendingAgePositions = NO_PENDING_AGE_POSITIONS;

  /** Where the next reading starts: the positions the last one returned. */
  get current(): PendingAgePositions {
    return this.from;
  }

  /** The next reading, from the positions the last one returned. */
  statement(n: OutboxNames, orphanAfterMs: number): SqlStatement {
    return oldestPendingAge(n, orphanAfterMs, this.from);
  }

  /** After a reading: keeps its positions for the next one, and returns its age in seconds. */
  record(row: OldestPendingAgeRow): number {
    const { tenants, positions, candidates, xmax, holders, server } = row;
    this.from = { tenants, positions, candidates, xmax, holders, server };
    return row.seconds;
  }
}
