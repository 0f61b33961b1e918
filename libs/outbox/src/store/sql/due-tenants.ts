import { DATABASE_NOW, type SqlStatement } from './statement';
import { NIL_UUID } from '../../model/outbox.constants';
import type { OutboxNames } from '../../model/table-names';

/** Where the relay's claims of new events start, per tenant (`ClaimPositions.pastSettled`). */
export interface DuePositions {
  tenants: readonly string[];
  /** Each tenant's position, a `seq` (decimal text). */
  seqs: readonly string[];
  /** The server the positions were read on (`SERVER_START`): on another, they are ignored. */
  server: string;
  /**
   * The database's `now()` at the relay's last complete scan: a positioned tenant's expired event leases are looked
   * for among those that expired since (a second early); null: among all of them.
   */
  leasesSince: string | null;
}

/**
 * Tenants with due work, and which kind: new events (`has_new`), or deliveries due for retry or whose lease
 * expired (`has_due`), so a round runs only the statements it needs. A SECURITY DEFINER
 * function (see the migration) so the relay role can see across tenants under row-level security; it walks the
 * partial indexes one tenant at a time (a loose index scan), so its cost grows with tenants, not rows. With the
 * relay's claim positions (`positions`), the six-argument form checks each positioned tenant's pending events
 * from its position, and looks for the others between them: past the entries of settled events a held snapshot
 * keeps (docs/adr/1206-claims-that-start-past-the-settled.md, addendum on the due-tenant scan). With a `floor` (the
 * claims' `ClaimFloor`, partitioned layout), the seven-argument form looks at events and deliveries from it only, so
 * the ranges of settled history below it are pruned (docs/adr/1207-partitioned-history.md).
 */
export function dueTenants(
  n: OutboxNames,
  limit: number,
  afterTenant: string | null,
  positions: DuePositions | null = null,
  floor: string = NIL_UUID,
): SqlStatement {
  if (positions === null)
    return {
      text: `select tenant_id, has_new, has_due from ${n.dueTenants}($1, $2)`,
      values: [limit, afterTenant],
    };
  const values = [
    limit,
    afterTenant,
    positions.tenants,
    positions.seqs,
    positions.server,
    positions.leasesSince,
  ];
  // without a bound, the six-argument form: today's layout keeps its statement and plan (ADR 1207, addendum "The
  // due-tenant scan stops at the floor")
  if (floor === NIL_UUID)
    return {
      text: `select tenant_id, has_new, has_due from ${n.dueTenants}($1, $2, $3::uuid[], $4::bigint[], $5, $6::timestamptz)`,
      values,
    };
  return {
    text: `select tenant_id, has_new, has_due from ${n.dueTenants}($1, $2, $3::uuid[], $4::bigint[], $5, $6::timestamptz, $7::uuid)`,
    values: [...values, floor],
  };
}

/**
 * The transaction's `now()` as ISO 8601 text in UTC: beside a due-tenant scan, the `leasesSince` of the next one,
 * which another session may read whatever its TimeZone and DateStyle (`now()::text` is written in them).
 */
export function transactionNow(): SqlStatement {
  return {
    text: `select ${DATABASE_NOW} as now`,
    values: [],
  };
}
