import { Client } from 'pg';
import { claimNewEvents } from '../../libs/outbox/src/store/sql/claim-new';
import { fanOutPendingEvents } from '../../libs/outbox/src/store/sql/fan-out';
import { outboxNames } from '../../libs/outbox/src/model/table-names';
import type { SqlStatement } from '../../libs/outbox/src/store/sql/statement';
import { holdSnapshot } from '../support/held-snapshot';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { TENANT, truncateOutbox } from '../support/outbox-fixture';
import { insertPendingEvents, registerLiveConsumer } from '../support/claim-history';
import { literalArguments } from '../support/generic-plan-buffers';

const EVENT = 'test.claim-size.v1';
const CONSUMER = 'claimSize.local';
const SIZE = 250;
const SETTLED = 25_000;
const names = outboxNames();

/**
 * A claim reads the events it took once, whatever its size — the fan-out a primary-key probe each (`takenEvents`),
 * the lean claim from the rows its scan locked (a jsonb object of claim counts, not a join of two CTEs, ADR 0804's
 * addendum on the re-read): read inside the join to its leases or delivery rows, the planner looped over those and probed every id at each turn —
 * quadratic in the claim's size (122,903 buffers for a lean claim of 250 events, 965 for 20), and claims grow when
 * a held snapshot slows the relay down (docs/adr/1206-claims-that-start-past-the-settled.md, addendum on claims
 * that grow under a hold). With custom plans and with the named statement's generic plan.
 */
describe('a claim of many events', () => {
  let db: TestDatabase;
  let client: Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    client = new Client({ connectionString: db.url });
    await client.connect();
  });
  let holder: Client | undefined;
  beforeEach(async () => {
    // the case: a held snapshot, the events settled under it as the lean claim and its outcome do (a
    // lease inserted and deleted, the event published), the planner's statistics from before (no ANALYZE since)
    holder = await holdSnapshot(db.url);
    await insertPendingEvents(db, TENANT, EVENT, SETTLED);
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       select id, tenant_id, gen_random_uuid(), now() from event_outbox where status = 'pending'`,
    );
    await db.sql(`delete from outbox_event_leases`);
    await settlePending();
    await registerLiveConsumer(db, CONSUMER, [EVENT]);
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

  const common = {
    tenantId: TENANT,
    liveWithinMs: 60_000,
    limit: SIZE,
    leaseToken: '00000000-0000-0000-0000-000000000001',
    leaseMs: 60_000,
    from: '0',
  };
  const forms: [string, () => SqlStatement, 'leases' | 'deliveries'][] = [
    ['the lean claim', () => claimNewEvents(names, { ...common, inProcess: [CONSUMER] }), 'leases'],
    [
      'the fan-out, leasing in-process pairs',
      () =>
        fanOutPendingEvents(names, {
          ...common,
          hosted: [CONSUMER],
          inProcess: [CONSUMER],
          tenantConsumers: [],
        }),
      'leases',
    ],
    [
      'the fan-out, writing delivery rows',
      () =>
        fanOutPendingEvents(names, {
          ...common,
          hosted: [CONSUMER],
          inProcess: [],
          tenantConsumers: [],
        }),
      'deliveries',
    ],
  ];

  /**
   * Runs `statement` in rolled-back transactions, as a prepared statement on its custom or generic plan: how
   * many events it answered with, and the shared buffers it touched (from its plan, a second run).
   */
  async function run(
    statement: SqlStatement,
    plan: 'force_custom_plan' | 'force_generic_plan',
    column: 'leases' | 'deliveries',
  ): Promise<{ claimed: number; buffers: number }> {
    // EXECUTE takes no bind parameters: each value as a literal
    const args = literalArguments(client, statement);
    await client.query(`prepare claim_size as ${statement.text}`);
    try {
      const inTransaction = async <T>(body: () => Promise<T>): Promise<T> => {
        await client.query('begin');
        try {
          await client.query(`set local plan_cache_mode = ${plan}`);
          return await body();
        } finally {
          await client.query('rollback');
        }
      };
      const { rows } = await inTransaction(() =>
        client.query<Record<string, unknown[]>>(`execute claim_size(${args})`),
      );
      const explained = await inTransaction(() =>
        client.query<{ 'QUERY PLAN': { Plan: Record<string, number> }[] }>(
          `explain (analyze, buffers, format json) execute claim_size(${args})`,
        ),
      );
      const root = explained.rows[0]!['QUERY PLAN'][0]!.Plan;
      return {
        claimed: rows[0]![column]!.length,
        buffers: root['Shared Hit Blocks']! + root['Shared Read Blocks']!,
      };
    } finally {
      await client.query('deallocate claim_size');
    }
  }

  async function settlePending(): Promise<void> {
    await db.sql(
      `update event_outbox set status = 'published', published_at = now() where status = 'pending'`,
    );
  }

  /** The buffers of a claim of `size` pending events (all of them). */
  async function claimOf(
    size: number,
    statement: () => SqlStatement,
    plan: 'force_custom_plan' | 'force_generic_plan',
    column: 'leases' | 'deliveries',
  ): Promise<number> {
    await settlePending();
    await insertPendingEvents(db, TENANT, EVENT, size);
    const { claimed, buffers } = await run(statement(), plan, column);
    expect(claimed).toBe(size);
    return buffers;
  }

  for (const [form, statement, column] of forms)
    for (const plan of ['force_custom_plan', 'force_generic_plan'] as const)
      it(`${form} reads a number of buffers linear in its size (${plan})`, async () => {
        const small = await claimOf(SIZE / 10, statement, plan, column);
        const large = await claimOf(SIZE, statement, plan, column);
        // ten times the events, about ten times the buffers (about 16 per event on the plain layout); read
        // inside the join, about a hundred times (91,975 buffers for the lean claim of 250 here)
        expect(large).toBeLessThan(15 * small);
      });
});
