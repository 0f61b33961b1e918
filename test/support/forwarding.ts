import type { TestApp } from './build-app';
import type { TestDatabase } from './test-database';

/** What the forwarding specs enqueue: events of one tenant and name, payload `n` in commit order. */
export interface OrderEvents {
  tenantId: string;
  eventName: string;
  correlationId: string;
}

/** `count` events in commits of 1,000, payload `n` from `first` on, spread round-robin over `aggregates`. */
export async function enqueueOrders(
  app: TestApp,
  kind: OrderEvents,
  count: number,
  aggregates: number,
  first = 0,
): Promise<string[]> {
  const ids: string[] = [];
  for (let from = first; from < first + count; from += 1000) {
    const events = Array.from({ length: Math.min(1000, first + count - from) }, (_, i) => ({
      tenantId: kind.tenantId,
      eventName: kind.eventName,
      payload: { n: from + i },
      aggregateType: 'order',
      aggregateId: `o-${(from + i) % aggregates}`,
      correlationId: kind.correlationId,
    }));
    ids.push(...(await app.dataSource.transaction((m) => app.outbox.enqueueMany(m, events))));
  }
  return ids;
}

/**
 * Enqueues 10,000 events over 100 aggregates in ten commits of 1,000, each drained before the next (a steady flow:
 * every aggregate's events spread over all ten), and returns their ids, the relay's totals and the time it took.
 */
export async function forwardTenThousand(
  app: TestApp,
  kind: OrderEvents,
): Promise<{ ids: string[]; totals: { succeeded: number; failed: number; dead: number }; seconds: number }> {
  const ids: string[] = [];
  const totals = { succeeded: 0, failed: 0, dead: 0 };
  const began = performance.now();
  for (let chunk = 0; chunk < 10; chunk++) {
    ids.push(...(await enqueueOrders(app, kind, 1000, 100, chunk * 1000)));
    const round = await app.relay.drain();
    for (const key of ['succeeded', 'failed', 'dead'] as const) totals[key] += round[key];
  }
  return { ids, totals, seconds: (performance.now() - began) / 1000 };
}

/** A consumer's deliveries by status: how many, the highest attempt count, an error code and text among them. */
export function deliveryCounts(
  db: TestDatabase,
  consumer: string,
): Promise<
  { status: string; n: number; attempts: number; error_code: string | null; last_error: string | null }[]
> {
  return db.sql(
    `select status, count(*)::int as n, max(attempt_count)::int as attempts, max(error_code) as error_code,
            max(last_error) as last_error
       from outbox_deliveries where consumer_name = $1 group by status`,
    [consumer],
  );
}

/** How many of a consumer's deliveries are delivered. */
export async function deliveredCount(db: TestDatabase, consumer: string): Promise<number> {
  const [row] = await db.sql<{ n: number }>(
    `select count(*)::int as n from outbox_deliveries where consumer_name = $1 and status = 'delivered'`,
    [consumer],
  );
  return row!.n;
}
