import type { SqlStatement } from './statement';
import type { OutboxNames } from './schema';

/** Most tenant ids a wake-up names (PostgreSQL caps a payload below 8,000 bytes); beyond, it names none. */
const WAKEUP_MAX_TENANTS = 200;

/**
 * Wakes the relays of every process (sent after a commit, never inside the app's transaction). The payload
 * lists the tenants with new events (comma-separated), or is empty: "look for due tenants".
 */
export function notifyWakeup(n: OutboxNames, tenants: readonly string[]): SqlStatement {
  // Its own implicit transaction, committed without waiting for the WAL flush: a wake-up needs no durability.
  return {
    text: `select set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`,
    values: [n.wakeupChannel, tenants.length <= WAKEUP_MAX_TENANTS ? tenants.join(',') : ''],
  };
}

/** The tenants a wake-up's payload names (the relay checks each is a UUID). */
export function wakeupTenants(payload: string | undefined): string[] {
  return payload ? payload.split(',') : [];
}

/** Subscribes a dedicated connection to wake-ups. */
export function listenWakeup(n: OutboxNames): SqlStatement {
  return { text: `listen ${n.wakeupChannel}`, values: [] };
}
