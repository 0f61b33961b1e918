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
 * The app's insert with a wake-up riding in it: PostgreSQL delivers the NOTIFY when the app's transaction commits,
 * and drops it if it rolls back. Still one statement, one round trip; its rows are `pg_notify`'s (callers of the
 * plain inserts read none).
 */
export function carryingWakeup(n: OutboxNames, insert: SqlStatement, payload: string): SqlStatement {
  const next = insert.values.length + 1;
  return {
    text: `with inserted as (${insert.text}) select pg_notify($${next}, $${next + 1})`,
    values: [...insert.values, n.wakeupChannel, payload],
  };
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
