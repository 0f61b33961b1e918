import { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT } from '../support/outbox-fixture';
import {
  claimDueDeliveries,
  lockConsumerLimits,
  outboxNames,
  type SqlStatement,
  type TenantConsumerLimits,
} from '../../libs/outbox/src/store/sql';

/**
 * The turns a claim takes (issue 36, docs/adr/1104-consumer-limits-in-the-database.md, "a claim takes the turns of
 * the consumers with work only"), statement by statement: a tenant with 201 capped consumers of its own, work for
 * one of them and for an unlimited consumer.
 */

const PARTNER = 'subscription:partner';
const IDLE = Array.from({ length: 200 }, (_, i) => `subscription:idle-${i}`);
const NAMES = [...IDLE, PARTNER];
/** Each capped at one delivery in flight. */
const LIMITS: TenantConsumerLimits = {
  names: NAMES,
  caps: NAMES.map(() => 1),
  rateLimits: NAMES.map(() => null),
  rateIntervalsMs: NAMES.map(() => null),
};
const names = outboxNames('public');
const lock = lockConsumerLimits(names, { tenantId: TENANT, consumers: NAMES, tenantLimits: LIMITS });
const claim = claimDueDeliveries(names, {
  tenantId: TENANT,
  consumers: [...NAMES, 'plain'],
  limit: 5,
  leaseToken: '22222222-2222-4222-8222-222222222222',
  leaseMs: 60_000,
  limited: NAMES,
  tenantLimits: LIMITS,
});

let db: TestDatabase;
let client: Client;

beforeAll(async () => {
  db = await createTestDatabase();
  client = new Client({ connectionString: db.url });
  await client.connect();
  // 2,000 events, each due for the partner and for an unlimited consumer
  await db.sql(
    `insert into event_outbox (id, tenant_id, event_name, payload, status)
     select gen_random_uuid(), $1, 'test.turns.v1', '{}', 'published' from generate_series(1, 2000)`,
    [TENANT],
  );
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, next_attempt_at)
     select e.id, e.tenant_id, c, e.seq, now() - interval '1 minute'
       from event_outbox e, unnest(array[$1, 'plain']) c`,
    [PARTNER],
  );
  await db.sql('analyze');
}, 60_000);

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

const run = (s: SqlStatement) => client.query(s.text, s.values as unknown[]);

it('locks (and writes) the turn of the limited consumer with work only, by an index probe per consumer', async () => {
  await client.query('begin');
  try {
    const plan = await client.query<{ 'QUERY PLAN': string }>(
      `explain (analyze, costs off, timing off) ${lock.text}`,
      lock.values as unknown[],
    );
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    // one row written (inserted here), none for the 200 consumers without work (PostgreSQL 18 prints `1.00`)
    expect(text).toMatch(/Insert on outbox_consumer_limits l \(actual rows=1(\.00)? /);
    // the probe walks the index of open rows per consumer (in the partitioned layout, each range's), never the
    // table (a scan of it per consumer: 201 scans of 4,000 rows)
    expect(text).toMatch(/Index Scan using \S*open\S* on outbox_deliveries/);
    expect(text).not.toMatch(/Seq Scan on outbox_deliveries/);
    expect((await db.sql(`select consumer_name from outbox_consumer_limits`)).length).toBe(0);
  } finally {
    await client.query('rollback');
  }
});

it('claims only for the consumers whose turn it took: a row of another limited consumer committed in between waits', async () => {
  await client.query('begin');
  try {
    const [{ turns }] = (await run(lock)).rows as { turns: string }[];
    expect(turns).toBe(`{${PARTNER}}`);
    // another transaction commits a due row of an idle capped consumer after the turns were taken
    await db.sql(
      `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, next_attempt_at)
       select id, tenant_id, $1, seq, now() - interval '1 minute' from event_outbox order by seq limit 1`,
      [IDLE[0]],
    );
    const claimed = (await run(claim)).rows.map((r: { consumer_name: string }) => r.consumer_name).sort();
    // the partner's one (its cap), the unlimited consumer's claim of 5; not the idle consumer's row, whose turn
    // this claim does not hold (its room would be counted without it)
    expect(claimed).toEqual(['plain', 'plain', 'plain', 'plain', 'plain', PARTNER]);
  } finally {
    await client.query('rollback');
    await db.sql(`delete from outbox_deliveries where consumer_name = $1`, [IDLE[0]]);
  }
});

it('a claim after that takes the turn of the consumer whose row came, and claims it', async () => {
  await db.sql(
    `insert into outbox_deliveries (event_id, tenant_id, consumer_name, event_seq, next_attempt_at)
     select id, tenant_id, $1, seq, now() - interval '1 minute' from event_outbox order by seq limit 1`,
    [IDLE[0]],
  );
  await client.query('begin');
  try {
    const [{ turns }] = (await run(lock)).rows as { turns: string }[];
    expect(turns).toBe(`{${IDLE[0]},${PARTNER}}`);
    const claimed = (await run(claim)).rows.map((r: { consumer_name: string }) => r.consumer_name);
    expect(claimed.filter((c) => c !== 'plain').sort()).toEqual([PARTNER, IDLE[0]].sort());
  } finally {
    await client.query('rollback');
    await db.sql(`delete from outbox_deliveries where consumer_name = $1`, [IDLE[0]]);
  }
});
