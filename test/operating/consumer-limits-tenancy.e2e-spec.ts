import { Injectable } from '@nestjs/common';
import { OnOutboxEvent } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueManyIn, TENANTS } from '../support/outbox-fixture';
import { createLoginRole, type TestRole } from '../support/test-roles';

/** Where the handlers count what is in flight: the test's database and the outbox's schema. */
let probe: { db: TestDatabase; schema: string };
/** What each handler run saw in flight for its consumer (its own delivery included). */
const seen: number[] = [];
const apps: TestApp[] = [];
const cleanups: (() => Promise<void>)[] = [];

/** Records what `consumer` has in flight in `tenantId`, or over every tenant (null). */
async function record(consumer: string, tenantId: string | null): Promise<void> {
  const [row] = await probe.db.sql<{ n: number }>(
    `select count(*)::int n from ${probe.schema}.outbox_deliveries
      where consumer_name = $1 and ($2::uuid is null or tenant_id = $2) and status = 'processing'
        and lease_expires_at > now()`,
    [consumer, tenantId],
  );
  seen.push(row!.n);
}

/** Capped per tenant, in count and in rate. */
@Injectable()
class PerTenant {
  @OnOutboxEvent('test.lt.*', {
    consumer: 'per-tenant',
    concurrency: { perTenant: 1 },
    rateLimit: { limit: 2, intervalMs: 60_000, perTenant: true },
  })
  handle(event: { tenantId: string }): Promise<void> {
    return record('per-tenant', event.tenantId);
  }
}

/** One in flight over every tenant. */
@Injectable()
class Capped {
  @OnOutboxEvent('test.lc.*', { consumer: 'capped', concurrency: { global: 1 } })
  handle(): Promise<void> {
    return record('capped', null);
  }
}

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
  while (cleanups.length > 0) await cleanups.pop()!();
  seen.length = 0;
});

async function start(url: string, providers: object[], schema?: string): Promise<TestApp> {
  const app = await buildApp({
    url,
    providers: providers as never[],
    outbox: schema ? { schema } : undefined,
  });
  apps.push(app);
  return app;
}

describe('consumer limits per tenant, on a relay role that owns nothing (row-level security)', () => {
  it("charges each tenant its own starts and its own in-flight count: one tenant's use leaves another's room whole", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    probe = { db, schema: 'public' };
    const relayRole: TestRole = await createLoginRole(db, 'outbox_relay');
    // after the database: it holds the role's grants
    cleanups.unshift(() => relayRole.drop());
    const writer = await start(db.url, []);
    const relay = await start(relayRole.url, [PerTenant]);
    await relay.relay.heartbeat();
    // three in the first tenant, two in the second: 2 a minute in each lets 2 + 2 through
    const tenants = [TENANTS[0], TENANTS[0], TENANTS[0], TENANTS[1], TENANTS[1]];
    await enqueueManyIn(
      writer,
      tenants.map((tenantId, i) => ({ eventName: 'test.lt.a.v1', tenantId, payload: { i } })),
    );
    await relay.relay.drain();
    const rows = await db.sql<{ tenant_id: string; status: string; n: number }>(
      `select tenant_id, status, count(*)::int n from outbox_deliveries where consumer_name = 'per-tenant'
        group by 1, 2 order by 1, 2`,
    );
    const expected = [
      { tenant_id: TENANTS[0], status: 'delivered', n: 2 },
      { tenant_id: TENANTS[0], status: 'pending', n: 1 },
      { tenant_id: TENANTS[1], status: 'delivered', n: 2 },
    ];
    expect(rows).toEqual(
      expected.sort((a, b) => `${a.tenant_id}${a.status}`.localeCompare(`${b.tenant_id}${b.status}`)),
    );
    expect(seen).toEqual([1, 1, 1, 1]);
    // the pending one waits uncharged
    const [waiting] = await db.sql<{ attempt_count: number }>(
      `select attempt_count from outbox_deliveries where consumer_name = 'per-tenant' and status = 'pending'`,
    );
    expect(waiting!.attempt_count).toBe(0);
  });
});

describe('consumer limits in a schema of their own', () => {
  it('holds a global cap with the statements and the in-flight function moved to that schema', async () => {
    const db = await createTestDatabase([], { schema: 'lim_s' });
    cleanups.push(() => db.drop());
    probe = { db, schema: 'lim_s' };
    const app = await start(db.url, [Capped], 'lim_s');
    await app.relay.heartbeat();
    await enqueueManyIn(
      app,
      TENANTS.map((tenantId, i) => ({ eventName: 'test.lc.a.v1', tenantId, payload: { i } })),
    );
    await app.relay.drain();
    const rows = await db.sql<{ status: string; n: number }>(
      `select status, count(*)::int n from lim_s.outbox_deliveries group by 1`,
    );
    expect(rows).toEqual([{ status: 'delivered', n: TENANTS.length }]);
    expect(seen).toEqual(TENANTS.map(() => 1));
    const [turns] = await db.sql<{ n: number }>(
      `select count(*)::int n from lim_s.outbox_consumer_limits where consumer_name = 'capped'`,
    );
    expect(turns!.n).toBe(1);
  });
});
