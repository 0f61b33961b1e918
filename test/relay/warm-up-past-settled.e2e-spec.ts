import { Client } from 'pg';
import { newEventsWarmUp } from '../../libs/outbox/src/store/sql/claim-new';
import { fanOutPendingEvents } from '../../libs/outbox/src/store/sql/fan-out';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { DATABASE_NOW } from '../../libs/outbox/src/store/sql/statement';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import type { SqlStatement } from '../../libs/outbox/src/store/sql/statement';
import { holdSnapshot } from '../support/held-snapshot';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.warm-up.v1';
const names = outboxNames();

/**
 * A connection's warm-up of its named claims (`newEventsWarmUp`, run by `refreshPrepared` as a round lets its
 * connection go) takes nothing and reads a bounded number of buffers under a held snapshot, whether the nil tenant
 * it claims for has no events (a multi-tenant app) or every one (a single-tenant app); the fan-out's release of
 * expired leases (`released`, run when the executor finishes, its buffers outside the top node's) walks no more
 * of the lease table's expiry index than its recovery did (docs/adr/1206-claims-that-start-past-the-settled.md,
 * addendum on the warm-up).
 */
describe("the warm-up of a connection's claims under a held snapshot", () => {
  let db: TestDatabase;
  let client: Client;
  let other: Client;
  let holder: Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    client = new Client({ connectionString: db.url });
    await client.connect();
    other = new Client({ connectionString: db.url });
    await other.connect();
  });
  afterEach(async () => {
    await holder?.end();
    holder = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await client?.end();
    await other?.end();
    await db?.drop();
  });

  /**
   * The shared buffers `statement` touched (EXPLAIN ANALYZE in a rolled-back transaction): the top node's, and the
   * fan-out's `released` (a data-modifying CTE the answer does not read: run at the executor's finish, counted
   * apart).
   */
  async function buffers(statement: SqlStatement): Promise<{ top: number; released: number; all: number }> {
    await client.query('begin');
    try {
      const plan = await client.query<Record<string, string>>(
        `explain (analyze, buffers) ${statement.text}`,
        [...statement.values],
      );
      const text = plan.rows.map((row) => Object.values(row)[0]!).join('\n');
      const count = (line: string): number =>
        Number(/hit=(\d+)/.exec(line)?.[1] ?? 0) + Number(/read=(\d+)/.exec(line)?.[1] ?? 0);
      const top = /Buffers: shared [^\n]*/.exec(text)?.[0] ?? '';
      const released = /CTE released\n[^\n]*\n\s*(Buffers: shared [^\n]*)/.exec(text)?.[1] ?? '';
      return { top: count(top), released: count(released), all: count(top) + count(released) };
    } finally {
      await client.query('rollback');
    }
  }

  /** Settles `n` events of `tenant` as the lean claim and its outcome do: a lease inserted and deleted, published. */
  async function settle(tenant: string, n: number): Promise<void> {
    await db.sql(
      `insert into event_outbox (id, tenant_id, event_name, payload, status, published_at)
       select gen_random_uuid(), $1, $2, '{}'::jsonb, 'published', now() from generate_series(1, $3::int)`,
      [tenant, EVENT, n],
    );
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() - interval '1 minute' from event_outbox where status = 'published'`,
    );
    await db.sql(`delete from outbox_event_leases`);
  }

  async function hold(): Promise<void> {
    holder = await holdSnapshot(db.url);
  }

  async function pending(tenant: string): Promise<string> {
    const [row] = await db.sql<{ id: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, $2, '{}'::jsonb)
       returning id`,
      [tenant, EVENT],
    );
    return row!.id;
  }

  it('locks no pending event of the nil tenant (a single-tenant app claims for it)', async () => {
    const id = await pending(NIL_UUID);
    for (const statement of newEventsWarmUp(names, { leanClaim: true })) {
      await client.query('begin');
      try {
        await client.query(statement.text, [...statement.values]);
        // a live claim beside it: the warm-up's lock would make it skip the event
        const { rows } = await other.query<{ id: string }>(
          `select id from event_outbox where id = $1 for update skip locked`,
          [id],
        );
        expect(rows.map((r) => r.id)).toEqual([id]);
      } finally {
        await client.query('rollback');
      }
    }
  });

  it.each([
    ['another tenant (a multi-tenant app)', TENANT],
    ['the nil tenant (a single-tenant app)', NIL_UUID],
  ])('reads a bounded number of buffers when the settled events are of %s', async (_, tenant) => {
    await hold();
    await settle(tenant, 50_000);
    await pending(tenant);
    // what autovacuum's analyze tells the planner during a hold: no live lease
    await db.sql('analyze event_outbox, outbox_event_leases');
    const [fanOut, lean] = newEventsWarmUp(names, { leanClaim: true });
    // before: the fan-out's release walked the 50,000 entries of the expiry index (613 buffers), and for the nil
    // tenant's own events both claims scanned every settled one from the start (1,235 and 732 buffers in all)
    expect((await buffers(fanOut!)).all).toBeLessThan(30);
    expect((await buffers(lean!)).all).toBeLessThan(30);
  });

  it("releases expired leases without walking the expiry index's entries below the recovery's bound", async () => {
    await hold();
    await settle(TENANT, 50_000);
    const [{ since }] = await db.sql<{ since: string }>(`select ${DATABASE_NOW} as since`);
    await db.sql('analyze event_outbox, outbox_event_leases');
    const fanOut = fanOutPendingEvents(names, {
      tenantId: TENANT,
      hosted: ['warm-up.local'],
      inProcess: ['warm-up.local'],
      tenantConsumers: [{ name: 'warm-up.local', eventNames: [EVENT] }],
      liveWithinMs: 60_000,
      limit: 100,
      leaseToken: '00000000-0000-0000-0000-000000000001',
      leaseMs: 60_000,
      from: '0',
      leasesSince: since!,
    });
    // the release walked the 50,000 entries of leases deleted under the hold before (610 buffers), with nothing
    // to release
    expect((await buffers(fanOut)).released).toBeLessThan(10);
  });
});
