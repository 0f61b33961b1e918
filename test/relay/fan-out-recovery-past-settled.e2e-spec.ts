import { Client } from 'pg';
import { fanOutPendingEvents } from '../../libs/outbox/src/store/sql/fan-out';
import { DATABASE_NOW } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import type { SqlStatement } from '../../libs/outbox/src/store/sql/statement';
import { holdSnapshot } from '../support/held-snapshot';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.fan-out-recovery.v1';
const names = outboxNames();

/**
 * The fan-out's recovery of fanned-out events whose relay died (its `stale` part) looks at the tenant's leases
 * that expired since its last complete look (`leasesSince`, see ClaimPositions.leasesSince), not at every
 * expired entry of the lease table's `(tenant_id, lease_expires_at)` index: under a held snapshot that index keeps
 * an entry for every lease deleted since the hold began (docs/adr/1206-claims-that-start-past-the-settled.md,
 * addendum on the fan-out's recovery).
 */
describe("the fan-out's recovery of expired event leases", () => {
  let db: TestDatabase;
  let client: Client;
  let holder: Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    client = new Client({ connectionString: db.url });
    await client.connect();
  });
  afterEach(async () => {
    await holder?.end();
    holder = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  function fanOut(leasesSince: string | null): SqlStatement {
    return fanOutPendingEvents(names, {
      tenantId: TENANT,
      hosted: ['recovery.local'],
      inProcess: ['recovery.local'],
      tenantConsumers: [{ name: 'recovery.local', eventNames: [EVENT] }],
      liveWithinMs: 60_000,
      limit: 100,
      leaseToken: '00000000-0000-0000-0000-000000000001',
      leaseMs: 60_000,
      from: '0',
      leasesSince,
    });
  }

  async function dbNow(): Promise<string> {
    const [row] = await db.sql<{ now: string }>(`select ${DATABASE_NOW} as now`);
    return row!.now;
  }

  /** Runs `statement` in a rolled-back transaction: what it returned, and the shared buffers it touched. */
  async function run(statement: SqlStatement): Promise<{ leases: { event_id: string }[]; buffers: number }> {
    await client.query('begin');
    try {
      const { rows } = await client.query<{ leases: { event_id: string }[] }>(statement.text, [
        ...statement.values,
      ]);
      const plan = await client.query<Record<string, string>>(
        `explain (analyze, buffers) ${statement.text}`,
        [...statement.values],
      );
      const line =
        plan.rows.map((row) => Object.values(row)[0]!).find((l) => /Buffers: shared/.test(l)) ?? '';
      const count = (kind: string): number => Number(new RegExp(`${kind}=(\\d+)`).exec(line)?.[1] ?? 0);
      return { leases: rows[0]!.leases, buffers: count('hit') + count('read') };
    } finally {
      await client.query('rollback');
    }
  }

  /** A fanned-out event (`processing`) whose relay died: its lease expired `agoMs` ago. Resolves with its id. */
  async function fannedOut(agoMs: number): Promise<string> {
    const [row] = await db.sql<{ id: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, deliveries_open)
       values (gen_random_uuid(), $1, $2, '{}'::jsonb, 'processing', 1) returning id`,
      [TENANT, EVENT],
    );
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       values ($1, $2, gen_random_uuid(), now() - $3::int * interval '1 millisecond')`,
      [row!.id, TENANT, agoMs],
    );
    return row!.id;
  }

  /** Settles `n` events as the lean claim and its outcome do: a lease inserted, expired, deleted; the event published. */
  async function settle(n: number): Promise<void> {
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at)
       select gen_random_uuid(), $1, $2, '{}'::jsonb, 'published', now() from generate_series(1, $3::int)`,
      [TENANT, EVENT, n],
    );
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() - interval '1 minute' from event_outbox where status = 'published'`,
    );
    await db.sql(`delete from outbox_event_leases where lease_expires_at < now() - interval '30 seconds'`);
  }

  it('recovers the events whose lease expired since the last look; every one without a bound', async () => {
    const old = await fannedOut(120_000);
    const since = await dbNow();
    const recent = await fannedOut(0);
    expect((await run(fanOut(since))).leases.map((l) => l.event_id)).toEqual([recent]);
    expect(
      (await run(fanOut(null))).leases.map((l) => l.event_id).sort((a, b) => a.localeCompare(b)),
    ).toEqual([old, recent].sort((a, b) => a.localeCompare(b)));
  });

  it('reads a bounded number of buffers under a held snapshot, whatever was settled since', async () => {
    holder = await holdSnapshot(db.url);
    await settle(50_000);
    const since = await dbNow();
    const recent = await fannedOut(0);
    // what autovacuum's analyze tells the planner during a hold: no live lease
    await db.sql('analyze event_outbox, outbox_event_leases');
    const all = await run(fanOut(null));
    const bounded = await run(fanOut(since));
    expect(bounded.leases.map((l) => l.event_id)).toEqual([recent]);
    expect(all.leases.map((l) => l.event_id)).toEqual([recent]);
    // without the bound, the recovery walks the 50,000 entries of leases deleted under the hold (616 buffers on
    // the plain layout); with it, none of them. The scan of pending events probes each partition's index once
    const [{ leaves }] = await db.sql<{ leaves: number }>(
      `select count(*)::int as leaves from pg_partition_tree('event_outbox') where isleaf`,
    );
    const probes = Math.max(1, leaves!);
    expect(all.buffers).toBeGreaterThan(400 + bounded.buffers);
    expect(bounded.buffers).toBeLessThan(30 * probes);
  });
});
