import type { TestDatabase } from './test-database';

/**
 * Ends leases now, as `relay.leaseMs` running out would: the leases of claimed events (in-process pairs) and
 * those of deliveries being sent (out-of-process pairs) get an expiry in the past, their tokens kept. Of the
 * events `eventIds` when given, else every lease. A test that needs a lease over makes it so here instead of
 * waiting for the clock. Returns how many leases it ended.
 */
export async function expireLeases(db: TestDatabase, eventIds?: readonly string[]): Promise<number> {
  const which = eventIds === undefined ? '' : 'and event_id = any($1::uuid[])';
  const values = eventIds === undefined ? [] : [eventIds];
  const rows = await db.sql<{ n: number }>(
    `with events as (
       update public.outbox_event_leases set lease_expires_at = now() - interval '1 second'
        where true ${which} returning 1),
     deliveries as (
       update public.outbox_deliveries set lease_expires_at = now() - interval '1 second'
        where status = 'processing' ${which} returning 1)
     select (select count(*) from events)::int + (select count(*) from deliveries)::int as n`,
    values,
  );
  return rows[0]!.n;
}
