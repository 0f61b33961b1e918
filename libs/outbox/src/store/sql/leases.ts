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

/** What `leaseVacuumHorizon` returns; no row when nothing holds the horizon back. */
export interface LeaseVacuumHorizonRow {
  /** The oldest transaction id that keeps VACUUM from removing the rows deleted after it, as text. */
  horizon: string;
}

/**
 * The vacuum horizon of this database's tables, as any role sees it (ADR 0601's addendum): the oldest of the
 * snapshots (`backend_xmin`) and transaction ids (`backend_xid`) of this database's sessions and of WAL senders,
 * of replication slots, and of this database's prepared transactions. Another session's read-only snapshot has no
 * transaction id: only `backend_xmin` shows it (not `pg_current_snapshot()`), and `pg_stat_get_activity` (under
 * `pg_stat_activity`, without its joins) shows that column of every role's sessions (not their `backend_type`).
 * Processes without a user are left out, autovacuum workers among them: a vacuum's own snapshot holds nothing
 * back, and one left in would make a long autovacuum look like a hold. Ids
 * have no order, only an age: the oldest has the greatest. Reads shared memory, and `pg_database` once.
 */
export function leaseVacuumHorizon(): SqlStatement {
  return {
    text: `select x::text as horizon
             from (select held.x
                     from pg_stat_get_activity(null) a, lateral (values (a.backend_xmin), (a.backend_xid)) held(x)
                    where a.pid <> pg_backend_pid() and a.usesysid is not null
                      and (a.datid is null
                           or a.datid = (select oid from pg_database where datname = current_database()))
                   union all
                   select xmin from pg_replication_slots
                   union all
                   select transaction from pg_prepared_xacts where database = current_database()) oldest
            where x is not null
            order by age(x) desc
            limit 1`,
    values: [],
  };
}
