import { writablePrimaryClient } from './writable-primary-client';

/** The failover scenario's event, enqueued by its API process with a business row of the same key. */
export const FAILOVER_EVENT = 'failover.order.v1';
export const FAILOVER_TENANT = 'f0000000-0000-4000-8000-00000000000f';
/** The probe's tenant: the relay takes tenants in turn, so the probe does not wait behind the load's backlog. */
export const PROBE_TENANT = 'e0000000-0000-4000-8000-00000000000e';

/**
 * The pg `Client` class of a failover child: with DATABASE_HOSTS (`port,port` on 127.0.0.1), connections go to
 * whichever of them accepts writes; without it, to DATABASE_URL's host (a proxy the test re-points).
 */
export function failoverPoolSettings(): Record<string, unknown> {
  const ports = process.env.DATABASE_HOSTS?.split(',').map(Number);
  return ports ? { Client: writablePrimaryClient(ports.map((port) => ({ host: '127.0.0.1', port }))) } : {};
}

/** Writes one line for the test to read (`KIND key time …`). */
export function report(line: string): void {
  process.stdout.write(`${line}\n`);
}
