import { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import { outboxNames, recordOutcomes } from '../../libs/outbox/src/store/sql';
import { BATCH_MARKER } from '../../libs/outbox/src/store/sql/transaction-context';
import { holdSnapshot } from '../support/held-snapshot';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';
import { deliveredPair } from '../support/pair-outcomes';

const EVENT = 'test.lease-release.v1';
const NAMES = outboxNames();

/**
 * The prepared outcome of a batch of pairs deletes its events' leases through the lease table's primary key,
 * whatever the table's size when its generic plan was made: under a held snapshot the table keeps every lease
 * deleted since the hold began, and a sequential scan made once per batch grows with the hold
 * (docs/adr/1206-claims-that-start-past-the-settled.md, addendum "The outcome's lease delete").
 */
describe("the prepared outcome's lease delete", () => {
  let db: TestDatabase;
  let relay: Client;
  let holder: Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    relay = new Client({ connectionString: db.url });
    await relay.connect();
  });
  afterEach(async () => {
    await holder?.end();
    holder = undefined;
    await truncateOutbox(db);
  });
  afterAll(async () => {
    await relay?.end();
    await db?.drop();
  });

  /** `n` pending events leased to `token`, as the lean claim leaves them. Resolves with their ids and seqs. */
  async function leased(n: number, token: string): Promise<{ id: string; seq: string }[]> {
    const events = await db.sql<{ id: string; seq: string }>(
      `insert into event_outbox (id, tenant_id, event_name, payload)
       select gen_random_uuid(), $1, $2, '{}'::jsonb from generate_series(1, $3::int) returning id, seq::text`,
      [TENANT, EVENT, n],
    );
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, $2, $3, now() + interval '1 minute' from unnest($1::uuid[]) as id`,
      [events.map((e) => e.id), TENANT, token],
    );
    return events;
  }

  function outcome(events: { id: string; seq: string }[], token: string) {
    return recordOutcomes(
      NAMES,
      events.map(({ id, seq }) => deliveredPair(id, seq, 'seen')),
      token,
      { fenced: true },
    );
  }

  it('probes the key on a plan made while the table was small, under a held snapshot', async () => {
    // the relay's session: the statement prepared, its generic plan made while the lease table is small
    const prepared = outcome([], randomUUID());
    await relay.query(`set plan_cache_mode = force_generic_plan`);
    // as the relay's own vacuum leaves it between batches: a page or so, no live lease
    await leased(20, randomUUID());
    await db.sql('delete from outbox_event_leases');
    await db.sql('vacuum outbox_event_leases');
    for (let i = 0; i < 6; i += 1) {
      const token = randomUUID();
      const events = await leased(20, token);
      const statement = outcome(events, token);
      await relay.query('begin');
      await relay.query(`select set_config('${BATCH_MARKER}', $1, true)`, [token]);
      await relay.query({ name: prepared.prepared, text: statement.text, values: [...statement.values] });
      await relay.query('commit');
    }
    holder = await holdSnapshot(db.url);
    // 50,000 leases taken and released under the hold: dead rows no vacuum can remove
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select gen_random_uuid(), $1, gen_random_uuid(), now() from generate_series(1, 50000)`,
      [TENANT],
    );
    await db.sql(`delete from outbox_event_leases`);
    const token = randomUUID();
    const events = await leased(20, token);
    const statement = outcome(events, token);
    await relay.query('begin');
    await relay.query(`select set_config('${BATCH_MARKER}', $1, true)`, [token]);
    try {
      const args = statement.values.map((v) =>
        v === null ? 'null' : relay.escapeLiteral(literal(v as Parameters<typeof literal>[0])),
      );
      const { rows } = await relay.query<{ 'QUERY PLAN': string }>(
        `explain (analyze, buffers) execute ${prepared.prepared}(${args.join(', ')})`,
      );
      const line = rows.map((r) => r['QUERY PLAN']).find((l) => /Buffers: shared/.test(l)) ?? '';
      const buffers = Number(/hit=(\d+)/.exec(line)?.[1] ?? 0) + Number(/read=(\d+)/.exec(line)?.[1] ?? 0);
      // this session's reads of the lease table not yet flushed (pg_stat_xact_*): this statement's, at least
      const [scans] = (
        await relay.query<{ seq_scan: string; idx_scan: string }>(
          `select seq_scan, idx_scan from pg_stat_xact_user_tables where relid = 'outbox_event_leases'::regclass`,
        )
      ).rows;
      const [{ released }] = (
        await relay.query<{ released: number }>(
          `select count(*)::int as released from outbox_event_leases where event_id = any($1::uuid[])`,
          [events.map((e) => e.id)],
        )
      ).rows as [{ released: number }];
      expect(released).toBe(0);
      expect(Number(scans!.seq_scan)).toBe(0);
      expect(Number(scans!.idx_scan)).toBeGreaterThan(0);
      // a sequential scan read the 50,000 dead leases (727 buffers for the statement on PostgreSQL 15); by key,
      // the statement reads about what it did before the hold (under 200)
      expect(buffers).toBeLessThan(400);
    } finally {
      await relay.query('rollback');
    }
  });
});

/** A parameter's value as PostgreSQL reads it in text: an array in its `{…}` form. */
function literal(value: string | number | boolean | readonly (string | number | boolean | null)[]): string {
  if (!Array.isArray(value)) return String(value);
  const element = (e: string | number | boolean | null): string =>
    e === null ? 'NULL' : `"${String(e).replace(/["\\]/g, '\\$&')}"`;
  return `{${value.map(element).join(',')}}`;
}
