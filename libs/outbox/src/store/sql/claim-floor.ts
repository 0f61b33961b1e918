import { SERVER_START, type SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * The partitioned layout's floor of the claims (`ClaimFloor`, store/claim-floor.ts): the lowest event id they need
 * to look at, `marginMs` or more before now, and the open floor (the start of the oldest range holding open work,
 * claimable now or later; both null on today's layout), with the statement snapshot's `xmin` and `xmax`
 * (transaction ids, as text) and the server's start, which say when the reading may raise the bound.
 *
 * `openFrom` and `since`: the open floor and `xmin` of an earlier reading (null: a reading of every range). The
 * reading then probes the ranges from that open floor only, lowered to what was reopened since (`outbox_reopened`,
 * written by `reopenedMark`): migration OutboxClaimFloorOpenFrom1764504600000.
 */
export function claimFloorReading(
  n: OutboxNames,
  marginMs: number,
  openFrom: string | null,
  since: string | null,
): SqlStatement {
  return {
    text: `select f.floor, f.open_floor as open,
                  pg_snapshot_xmin(pg_current_snapshot())::text as xmin,
                  pg_snapshot_xmax(pg_current_snapshot())::text as xmax,
                  ${SERVER_START} as server
             from ${n.claimFloor}($1::int * interval '1 millisecond', $2::uuid, $3::xid8) f`,
    values: [marginMs, openFrom, since],
  };
}

/**
 * A CTE that records, in the statement that brings work back in old ranges (a replay, a backfill's chunk), the
 * lowest event id of the rows of `cte` (its `event_id` column), for the floor's next reading to start from there
 * (`claimFloorReading`). Rows older than a day go as it writes (100 at most, none locked by another writer): a
 * reading only looks at rows written since the one before it.
 */
export function reopenedMark(n: OutboxNames, cte: string): string {
  return `reopened as (
             insert into ${n.reopened} (event_id)
             select m.event_id from (select min(event_id::text)::uuid as event_id from ${cte}) m where m.event_id is not null
           ), reopened_pruned as (
             delete from ${n.reopened}
              where ctid = any(array(select o.ctid from ${n.reopened} o where o.at < now() - interval '1 day'
                                      limit 100 for update skip locked))
           )`;
}
