import { SERVER_START, type SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * The partitioned layout's floor of the claims (`ClaimFloor`, store/claim-floor.ts): the lowest event id they need
 * to look at, `marginMs` or more before now (null on today's layout), with the statement snapshot's `xmin` and
 * `xmax` (transaction ids, as text) and the server's start, which say when the reading may raise the bound.
 */
export function claimFloorReading(n: OutboxNames, marginMs: number): SqlStatement {
  return {
    text: `select ${n.claimFloor}($1::int * interval '1 millisecond') as floor,
                  pg_snapshot_xmin(pg_current_snapshot())::text as xmin,
                  pg_snapshot_xmax(pg_current_snapshot())::text as xmax,
                  ${SERVER_START} as server`,
    values: [marginMs],
  };
}
