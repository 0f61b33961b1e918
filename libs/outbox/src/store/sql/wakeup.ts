import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** Most tenant ids a wake-up names (PostgreSQL caps a payload below 8,000 bytes); beyond, it names none. */
const WAKEUP_MAX_TENANTS = 200;

/**
 * A wake-up's payload: the tenants with new events (comma-separated), or empty — "look for due tenants" — when
 * they are too many to name.
 */
export function wakeupPayload(tenants: readonly string[]): string {
  return tenants.length <= WAKEUP_MAX_TENANTS ? tenants.join(',') : '';
}

/** Wakes the relays of every process, on a pooled connection after the commits it is for. */
export function notifyWakeup(n: OutboxNames, tenants: readonly string[]): SqlStatement {
  // Its own implicit transaction, committed without waiting for the WAL flush: a wake-up needs no durability.
  return {
    text: `select set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`,
    values: [n.wakeupChannel, wakeupPayload(tenants)],
  };
}

/**
 * What an app's insert that carries a wake-up starts with (ADR 0805, ADR 1004's addenda of 2026-12-06 and
 * 2026-12-07): its `pg_notify`, the payload in parameter `$at`. PostgreSQL delivers the NOTIFY when the app's
 * transaction commits, and drops it if it rolls back. Still one statement, one round trip. The insert reads its
 * rows from `wake` (`from wake` or `cross join wake`, one row): a CTE that calls a volatile function is run once,
 * however many rows the insert writes (`materialized` says so), and only because the insert reads it. The
 * statement is an insert, so it answers as the plain one does: no row, no row description (a `select pg_notify(…)`
 * after the insert answered one row of `void`, which pg parsed into a result for nobody).
 */
export function carriedWakeup(n: OutboxNames, at: number): string {
  // the channel is an identifier `outboxNames` checked (`listen` names it unquoted too): a literal, not a parameter
  return `with wake as materialized (select pg_notify('${n.wakeupChannel}', $${at}))\n`;
}

/**
 * A wake-up naming no tenant, sent inside the transaction it is for: PostgreSQL delivers it at that commit and
 * drops it with a rollback. Only in a handler's batch transaction, which the relay commits itself (no commit
 * subscriber hears it), and only for a delayed event: relays promote on it (docs/adr/1102-delayed-events-are-promoted.md).
 */
export function notifyWakeupAtCommit(n: OutboxNames): SqlStatement {
  return { text: `select pg_notify($1, '')`, values: [n.wakeupChannel] };
}

/** The tenants a wake-up's payload names (the relay checks each is a UUID). */
export function wakeupTenants(payload: string | undefined): string[] {
  return payload ? payload.split(',') : [];
}

/** Subscribes a dedicated connection to wake-ups. */
export function listenWakeup(n: OutboxNames): SqlStatement {
  return { text: `listen ${n.wakeupChannel}`, values: [] };
}
