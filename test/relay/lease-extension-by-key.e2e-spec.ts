import { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import { resolveOutboxOptions } from '../../libs/outbox/src/options/outbox-options';
import { relayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { leaseExtension } from '../../libs/outbox/src/store/pg-tenant-connection';
import { literalArguments } from '../support/generic-plan-buffers';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT } from '../support/outbox-fixture';

/** Leases taken and released between two vacuums. */
const DEAD = 20_000;
/** Leases in flight, and how many of them a narrowed batch extends. */
const LIVE = 200;
const EXTENDED = 50;

/**
 * A narrowed batch pushes back the leases of its events (`extendEventLeases`, an update by `event_id`). Between
 * two vacuums the lease table is a few hundred pages of dead leases while its statistics, from the last vacuum,
 * count the few hundred leases then live: a plan made in the relay's ordinary context scanned the whole table for
 * a few dozen ids. In the context the relay's policy gives (`RelayPolicy.leaseProbesByKey`) the update goes by the
 * key, as the claims do (ADR 0601's addendum of 2026-12-07).
 */
describe("a narrowed batch's lease extension", () => {
  let db: TestDatabase;
  let relay: Client;
  const { options } = resolveOutboxOptions();
  const policy = relayPolicy(options);
  beforeAll(async () => {
    db = await createTestDatabase();
    // no autovacuum of the table during the test: its statistics are the relay's last vacuum's
    await db.sql('alter table outbox_event_leases set (autovacuum_enabled = false)');
    relay = new Client({ connectionString: db.url });
    await relay.connect();
  });
  afterAll(async () => {
    await relay?.end();
    await db?.drop();
  });

  /** DEAD leases inserted and deleted beside the LIVE ones (those of `token`). */
  async function churn(token: string): Promise<void> {
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select gen_random_uuid(), $1, gen_random_uuid(), now() from generate_series(1, $2::int)`,
      [TENANT, DEAD],
    );
    await db.sql(`delete from outbox_event_leases where lease_token <> $1`, [token]);
  }

  /**
   * The plan's lines of the extension of `ids` in the context `byKey` gives (rolled back), and the shared buffers
   * of its scan (the update's own, the new versions and their index entries, are the same either way).
   */
  async function extension(
    ids: string[],
    token: string,
    byKey: boolean,
  ): Promise<{ plan: string[]; scan: number }> {
    const [context, update] = leaseExtension(options, TENANT, ids, token, byKey) as [
      { text: string; values: unknown[] },
      { text: string; values: unknown[] },
    ];
    await relay.query('begin');
    try {
      await relay.query(context.text, context.values);
      await relay.query('prepare extension as ' + update.text);
      const { rows } = await relay.query<{ 'QUERY PLAN': string }>(
        `explain (analyze, buffers, costs off, timing off, summary off) execute extension(${literalArguments(relay, update)})`,
      );
      const plan = rows.map((r) => r['QUERY PLAN']);
      // the update's line, then its scan's
      const [, scanLine = ''] = plan.filter((l) => /Buffers:/.test(l));
      const scan = [...scanLine.matchAll(/(?:hit|read)=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
      return { plan, scan };
    } finally {
      await relay.query('rollback');
      await relay.query('deallocate extension').catch(() => undefined);
    }
  }

  it('goes by the key beside the dead leases of a drain, not through the whole table', async () => {
    const token = randomUUID();
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select gen_random_uuid(), $1, $2, now() + interval '1 minute' from generate_series(1, $3::int)`,
      [TENANT, token, LIVE],
    );
    // a drain, then the relay's vacuum (its statistics: the live leases in a table of a few hundred pages), then
    // the next drain's dead leases
    await churn(token);
    await db.sql('vacuum (truncate false) outbox_event_leases');
    await churn(token);
    const ids = (
      await db.sql<{ event_id: string }>(
        `select event_id from outbox_event_leases order by random() limit $1`,
        [EXTENDED],
      )
    ).map((r) => r.event_id);

    const ordinary = await extension(ids, token, false);
    const shipped = await extension(ids, token, policy.leaseProbesByKey);
    // in the ordinary context: the whole table, 230 pages; by the key, 2 buffers per id and the leases' pages
    // (105; the update's own 410 come on top of either)
    expect(ordinary.plan.filter((l) => /Seq Scan on outbox_event_leases/.test(l))).not.toEqual([]);
    expect(shipped.plan.filter((l) => /Seq Scan on outbox_event_leases/.test(l))).toEqual([]);
    expect(ordinary.scan).toBeGreaterThan(200);
    expect(shipped.scan).toBeLessThan(ordinary.scan * 0.6);
  });
});
