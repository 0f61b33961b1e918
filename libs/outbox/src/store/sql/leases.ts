import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/**
 * Pushes back the lease of deliveries still being sent (external consumers), so a batch of slow endpoints
 * never outlives its lease while requests are in flight. Only rows still holding our token move.
 */
export function extendLeases(
  n: OutboxNames,
  ids: readonly string[],
  leaseToken: string,
  leaseMs: number,
): SqlStatement {
  return {
    text: `update ${n.deliveries} set lease_expires_at = clock_timestamp() + $3 * interval '1 millisecond'
            where id = any($1::bigint[]) and lease_token = $2 and status = 'processing'`,
    values: [ids, leaseToken, leaseMs],
  };
}

/**
 * Pushes back the leases of in-process events whose batch is being narrowed (see `LocalBatch.narrow`): each part
 * runs with a full lease, as the batch's first run did, so no other relay claims them meanwhile. Only leases
 * still holding our token move; one taken over stays lost (the part's fenced commit then fails).
 */
export function extendEventLeases(
  n: OutboxNames,
  eventIds: readonly string[],
  leaseToken: string,
  leaseMs: number,
): SqlStatement {
  return {
    text: `update ${n.eventLeases} set lease_expires_at = clock_timestamp() + $3 * interval '1 millisecond'
            where event_id = any($1::uuid[]) and lease_token = $2::uuid`,
    values: [eventIds, leaseToken, leaseMs],
  };
}

/**
 * Vacuums the lease table: `skip_locked` (another instance's vacuum in progress does the job), no truncation (it
 * would need an exclusive lock that stops every relay's claims for a moment). Outside any transaction.
 */
export function vacuumLeases(n: OutboxNames): SqlStatement {
  return { text: `vacuum (skip_locked, truncate false) ${n.eventLeases}`, values: [] };
}

/**
 * Whether this session's role may vacuum the lease table: it has the privileges of the table's or the
 * database's owner (superusers have all), or, from PostgreSQL 17, the `MAINTAIN` privilege (in a `case`: older
 * servers reject the privilege's name).
 */
export function mayVacuumLeases(n: OutboxNames): SqlStatement {
  return {
    text: `select pg_has_role(c.relowner, 'USAGE') or pg_has_role(d.datdba, 'USAGE')
                  or case when current_setting('server_version_num')::int >= 170000
                          then has_table_privilege(c.oid, 'MAINTAIN') else false end as allowed
             from pg_class c, pg_database d
            where c.oid = '${n.eventLeases}'::regclass and d.datname = current_database()`,
    values: [],
  };
}
