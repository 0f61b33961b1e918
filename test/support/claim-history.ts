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
