import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, OutboxRetention, type OutboxEvent } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueManyIn, TENANTS, type TestEvent } from '../support/outbox-fixture';
import { createLoginRole, type TestRole } from '../support/test-roles';
import { claimDueDeliveries, lockConsumerLimits, outboxNames } from '../../libs/outbox/src/store/sql';

/** Probes of the per-key rate limits' review (issue 36): key values, tenancy, schema, and the claim's cost. */

const apps: TestApp[] = [];
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  while (apps.length > 0) await apps.pop()!.close();
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** 2 a minute per `payload.p.id` of each tenant: a third event of a key waits. */
@Injectable()
class KeyedByPath {
  @OnOutboxEvent('test.kr.*', {
    consumer: 'keyed-path',
    rateLimit: { limit: 2, intervalMs: 60_000, perKey: { payload: 'p.id' } },
  })
  handle(event: OutboxEvent): void {
    void event;
  }
}

/** Events of one tenant: `group` names the key the test expects them to share (in `payload.g`). */
function keyedEvents(tenantId: string): TestEvent[] {
  const long = 'x'.repeat(10_000);
  const groups: [string, unknown[]][] = [
    ['a', [{ p: { id: 'a' } }, { p: { id: 'a' } }, { p: { id: 'a' } }]],
    // a number counts as its text: 7 and '7' are one key
    ['seven', [{ p: { id: 7 } }, { p: { id: '7' } }, { p: { id: 7 } }]],
    // missing, null, a null field: one key of their own
    ['none', [{}, { p: null }, { p: { id: null } }]],
    ['object', [{ p: { id: { x: 1 } } }]],
    ['quote', [{ p: { id: "'; drop table outbox_consumer_key_starts; --" } }]],
    ['unicode', [{ p: { id: 'Zürich ☃ 東京' } }, { p: { id: 'Zürich ☃ 東京' } }]],
    ['long', [{ p: { id: long } }, { p: { id: long } }, { p: { id: long } }]],
  ];
  return groups.flatMap(([g, payloads]) =>
    payloads.map((payload, i) => ({
      eventName: 'test.kr.a.v1',
      tenantId,
      payload: { ...(payload as object), g, i },
    })),
  );
}

/** Per tenant and group: how many were delivered, and how many wait uncharged. */
const EXPECTED_PER_TENANT = [
  { g: 'a', delivered: 2, waiting: 1 },
  { g: 'long', delivered: 2, waiting: 1 },
  { g: 'none', delivered: 2, waiting: 1 },
  { g: 'object', delivered: 1, waiting: 0 },
  { g: 'quote', delivered: 1, waiting: 0 },
  { g: 'seven', delivered: 2, waiting: 1 },
  { g: 'unicode', delivered: 2, waiting: 0 },
];

async function outcomes(
  db: TestDatabase,
  schema: string,
): Promise<{ tenant: string; g: string; delivered: number; waiting: number }[]> {
  return db.sql(
    `select d.tenant_id::text as tenant, e.payload->>'g' as g,
            (count(*) filter (where d.status = 'delivered'))::int as delivered,
            (count(*) filter (where d.status = 'pending' and d.attempt_count = 0))::int as waiting
       from ${schema}.outbox_deliveries d join ${schema}.event_outbox e on e.id = d.event_id
      where d.consumer_name = 'keyed-path'
      group by 1, 2 order by 1, 2`,
  );
}

function expectedFor(tenants: readonly string[]): { tenant: string; g: string }[] {
  return [...tenants].sort().flatMap((tenant) => EXPECTED_PER_TENANT.map((row) => ({ tenant, ...row })));
}

/** An app on `url` (closed after the test) hosting `providers`, the outbox in `schema` when given. */
async function start(url: string, providers: object[], schema?: string): Promise<TestApp> {
  apps.push(await buildApp({ url, providers: providers as never[], outbox: schema ? { schema } : {} }));
  return apps[apps.length - 1]!;
}

describe('per-key rate limits, key values and tenancy', () => {
  it('counts each payload value per tenant (the same values in two tenants are two keys) on a relay role that owns nothing; retention runs there', async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const relayRole: TestRole = await createLoginRole(db, 'outbox_relay');
    cleanups.unshift(() => relayRole.drop());
    const writer = await start(db.url, []);
    const relay = await start(relayRole.url, [KeyedByPath]);
    await relay.relay.heartbeat();
    const tenants = [TENANTS[0], TENANTS[1]];
    await enqueueManyIn(writer, tenants.flatMap(keyedEvents));
    await relay.relay.drain();
    expect(await outcomes(db, 'public')).toEqual(expectedFor(tenants));
    // the relay role's retention reaches the log (a row past its window goes, a live one stays)
    await db.sql(
      `insert into outbox_consumer_key_starts (consumer_name, tenant_id, rate_key, started_at, n)
       values ('keyed-path', $1, md5('past')::uuid, now() - interval '1 hour', 1)`,
      [TENANTS[2]],
    );
    await relay.app.get(OutboxRetention).purgeNow();
    const [left] = await db.sql<{ past: number; live: number }>(
      `select (count(*) filter (where tenant_id = $1))::int as past,
              (count(*) filter (where tenant_id <> $1))::int as live
         from outbox_consumer_key_starts`,
      [TENANTS[2]],
    );
    expect(left).toEqual({ past: 0, live: expect.any(Number) as number });
    expect(left!.live).toBeGreaterThan(0);
  });

  it('holds in a schema of its own', async () => {
    const db = await createTestDatabase([], { schema: 'key_s' });
    cleanups.push(() => db.drop());
    const app = await start(db.url, [KeyedByPath], 'key_s');
    await app.relay.heartbeat();
    await enqueueManyIn(app, keyedEvents(TENANTS[0]));
    await app.relay.drain();
    expect(await outcomes(db, 'key_s')).toEqual(expectedFor([TENANTS[0]]));
  });
});

describe("the keyed due claim's cost with many keys at their limit", () => {
  const TENANT = TENANTS[0];
  let db: TestDatabase;
  let client: Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    client = new Client({ connectionString: db.url });
    await client.connect();
  });

  afterAll(async () => {
    await client.end();
    await db.drop();
  });

  /**
   * `rows` due deliveries of a consumer limited to 1 a minute per `payload.p`, over `keys` keys each at its limit,
   * and one more of a key with room; the time of the due claim (the fastest of two) and what it claimed.
   */
  async function claimWithKeysAtLimit(
    keys: number,
    rows: number,
  ): Promise<{ plan: string; claimed: number }> {
    await db.sql(`delete from outbox_deliveries`);
    await db.sql(`delete from event_outbox`);
    await db.sql(`delete from outbox_consumer_key_starts`);
    await db.sql(
      `insert into outbox_consumers (name, event_patterns, rate_limit, rate_interval_ms, rate_key)
       values ('many-keys', '{test.mk.v1}', 1, 60000, 'payload:p')
       on conflict (name) do nothing`,
    );
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status)
       select gen_random_uuid(), $1, 'test.mk.v1',
              jsonb_build_object('p', case when i = 0 then 'free' else 'key' || (i % $2) end), 'published'
         from generate_series(0, $3) i`,
      [TENANT, keys, rows],
    );
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, next_attempt_at)
       select id, tenant_id, 'many-keys', seq, now() - interval '1 minute' + seq * interval '1 microsecond'
         from event_outbox`,
    );
    await db.sql(
      `insert into outbox_consumer_key_starts (consumer_name, tenant_id, rate_key, started_at, n)
       select 'many-keys', $1, md5('key' || i)::uuid, now(), 1 from generate_series(0, $2 - 1) i`,
      [TENANT, keys],
    );
    await db.sql('analyze');
    const names = outboxNames('public');
    const lock = lockConsumerLimits(names, { tenantId: TENANT, consumers: ['many-keys'] });
    const claim = claimDueDeliveries(names, {
      tenantId: TENANT,
      consumers: ['many-keys'],
      limit: 50,
      leaseToken: '22222222-2222-4222-8222-222222222222',
      leaseMs: 60_000,
      limited: ['many-keys'],
    });
    await client.query('begin');
    try {
      await client.query(lock.text, lock.values as unknown[]);
      const explained = await client.query<{ 'QUERY PLAN': string }>(
        `explain ${claim.text}`,
        claim.values as unknown[],
      );
      const result = await client.query(claim.text, claim.values as unknown[]);
      return { plan: explained.rows.map((r) => r['QUERY PLAN']).join('\n'), claimed: result.rowCount ?? 0 };
    } finally {
      await client.query('rollback');
    }
  }

  it('looks up the keys at their limit in a hash built once per claim, with 10 keys or 1,000 over 10,000 due rows', async () => {
    const few = await claimWithKeysAtLimit(10, 10_000);
    const many = await claimWithKeysAtLimit(1_000, 10_000);
    // each claim passes by every key at its limit and takes the one delivery of the key with room
    expect(few.claimed).toBe(1);
    expect(many.claimed).toBe(1);
    // the keys at their limit are looked up in a hash built once per claim (PostgreSQL 15 prints `NOT (hashed
    // SubPlan n)`, 18 `NOT (ANY ((… = (hashed SubPlan n).col1) …))`), not by a loop per due row (which made
    // the claim with 1,000 keys 64x the one with 10: 8.4 s against 0.13 s)
    for (const { plan } of [few, many]) expect(plan).toMatch(/NOT \((ANY \(.*)?hashed SubPlan \d+/);
  }, 120_000);
});
