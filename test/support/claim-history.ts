import type { TestDatabase } from './test-database';

/**
 * 20,000 events of `tenantId` named `eventName`, half pending and half processing with a pending delivery row of
 * `consumer` each: tables of some size for the claims' generic plans (statistics not read: the caller analyzes).
 */
export async function insertClaimHistory(
  db: Pick<TestDatabase, 'sql'>,
  tenantId: string,
  eventName: string,
  consumer: string,
): Promise<void> {
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
     select gen_random_uuid(), $1, $2, '{}', case when n % 2 = 0 then 'pending' else 'processing' end, 1
       from generate_series(1, 20000) as n`,
    [tenantId, eventName],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, status)
     select id, tenant_id, $1, seq, 'pending' from event_outbox where status = 'processing'`,
    [consumer],
  );
}

/** `count` pending events of `tenantId` named `eventName`, payload `{}`, inserted in one statement. */
export function insertPendingEvents(
  db: Pick<TestDatabase, 'sql'>,
  tenantId: string,
  eventName: string,
  count: number,
): Promise<unknown> {
  return db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload)
     select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, $3::int)`,
    [tenantId, eventName, count],
  );
}

/**
 * The consumer `name` of `patterns` in the persisted registry, seen now (as an instance hosting it reports it): a
 * live consumer for the claims a spec runs by hand.
 */
export function registerLiveConsumer(
  db: Pick<TestDatabase, 'sql'>,
  name: string,
  patterns: readonly string[],
): Promise<unknown> {
  return db.sql(
    `insert into outbox_consumers (name, event_patterns, last_seen_at) values ($1, $2, now())
     on conflict (name) do update set last_seen_at = now()`,
    [name, patterns],
  );
}
