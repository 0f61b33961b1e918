/**
 * The statements of retention (the settled events' purge from positions, the partitioned layout's ranges made and
 * dropped, expired idempotency keys), as `{ text, values }`; the operator's statements are in `admin.ts`.
 */
import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * Where each table's next retention batch starts (migration OutboxPurgeFromPosition1764504000000): pairs of a
 * range's lower bound (null: the table itself, or the partitioned layout's default partitions) and the
 * `published_at` its last batch ended at, as JSON wrote it (ISO 8601 to the microsecond: none is lost).
 */
export interface PurgePositions {
  ranges: readonly (string | null)[];
  ats: readonly string[];
}

/** One retention batch's reply: `deleted` is null when another instance holds the lock (no positions then). */
export interface PurgeSettledRow {
  deleted: number | null;
  ranges: (string | null)[] | null;
  ats: string[] | null;
}

/**
 * One retention batch, in its own short transaction: if no other instance is purging right now (a try-lock,
 * released at commit, so it can never leak to a pooled connection), deletes up to `batchSize` published events
 * older than `days` with their rows, each table read from its position in `from` (none: from its oldest event),
 * through the SECURITY DEFINER function that crosses tenants. Returns the number deleted and the positions moved
 * to, or a null `deleted` when another instance holds the lock. The function runs in the `case`'s subquery, an
 * initplan evaluated only when the `case` needs it, after the lock (a lateral join filtered on the lock ran the
 * function first); `offset 0` keeps the `case` from being copied into each column. Why positions: ADR 1206,
 * addendum "Retention's purge" (a held snapshot keeps the index entries of every event deleted since it began).
 */
export function purgeSettledBatch(
  n: OutboxNames,
  days: number,
  batchSize: number,
  from: PurgePositions,
): SqlStatement {
  return {
    text: `select (b ->> 'deleted')::int as deleted, b -> 'ranges' as ranges, b -> 'ats' as ats
             from (select case when pg_try_advisory_xact_lock(hashtextextended($1, 0))
                               then (select to_jsonb(p)
                                       from ${n.purgeSettled}(now() - $2::float8 * interval '1 day', $3, $4::uuid[], $5::timestamptz[]) p)
                          end as b
                   offset 0) s`,
    values: [n.retentionLock, days, batchSize, from.ranges, from.ats],
  };
}

/**
 * One step of the partitioned layout's maintenance (migration OutboxPartitionMaintenance1764502400000), under the
 * retention lock: the ranges it made, -1 when it wants to be called again (it widened its window), null when
 * another instance holds the lock. 0 in the unpartitioned layout.
 */
export function makePartitionsStep(n: OutboxNames): SqlStatement {
  return {
    text: `select case when pg_try_advisory_xact_lock(hashtextextended($1, 0)) then ${n.makePartitions}() end as made`,
    values: [n.retentionLock],
  };
}

/**
 * Drops the oldest range of the partitioned layout published over `days` ago in which everything is settled, under
 * the retention lock: 1 when it dropped one, 0 when none can be, -1 when the tables' lock was not granted in time,
 * null when another instance holds the retention lock. 0 in the unpartitioned layout.
 */
export function dropPartitionStep(n: OutboxNames, days: number): SqlStatement {
  return {
    text: `select case when pg_try_advisory_xact_lock(hashtextextended($1, 0))
                       then ${n.dropPartitions}(now() - $2::float8 * interval '1 day')
                  end as dropped`,
    values: [n.retentionLock, days],
  };
}

/**
 * One batch of retention of expired idempotency keys (migration OutboxDedupeKeys1764501900000), under the same
 * advisory try-lock as the events' batches: null when another instance holds it.
 */
export function purgeDedupeKeysBatch(n: OutboxNames, batchSize: number): SqlStatement {
  return {
    text: `select case when pg_try_advisory_xact_lock(hashtextextended($1, 0))
                       then ${n.purgeDedupeKeys}($2)
                  end as deleted`,
    values: [n.retentionLock, batchSize],
  };
}
