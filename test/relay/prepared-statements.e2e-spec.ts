import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { randomUUID } from 'node:crypto';
import {
  OnOutboxEvent,
  type OutboxEvent,
  type OutboxHandlerContext,
  type OutboxRelayOptions,
} from 'nestjs-pg-outbox';
import {
  CLAIM_NEW_NAME,
  claimDueDeliveries,
  claimNewEvents,
  fanOutPendingEvents,
  outboxNames,
  recordOutcomes,
  type SqlStatement,
} from '../../libs/outbox/src/store/sql';
import type { RelayPolicy } from '../../libs/outbox/src/options/relay-policy';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { buildApp, type TestApp } from '../support/build-app';
import { PolicySwitches } from '../support/policy-switches';
import { waitFor } from '../support/wait-for';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueManyIn, TENANT } from '../support/outbox-fixture';
import { deliveredPair } from '../support/pair-outcomes';
import { insertClaimHistory } from '../support/claim-history';

/** The outbox's names in the default schema, which these statements run against. */
const NAMES = outboxNames();
const EVENT = 'test.prepared.v1';

@Injectable()
class Seen {
  readonly ids: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'seen' })
  handle(event: OutboxEvent): void {
    this.ids.push(event.eventId);
  }
}

const WRITTEN = 'test.prepared.written.v1';

/** Writes through the batch transaction: its first query travels with the handler's context statement. */
@Injectable()
class Writer {
  readonly ids: string[] = [];

  @OnOutboxEvent(WRITTEN, { consumer: 'writer' })
  async handle(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    const [row] = await context.manager.query<{ id: string }[]>('select $1::uuid::text as id', [
      event.eventId,
    ]);
    this.ids.push(row!.id);
  }
}

interface PreparedRow {
  name: string;
  generic_plans: number;
  custom_plans: number;
  prepared_at: string;
}

/**
 * The claim's fan-out runs as a server-side prepared statement with a generic plan (`relay.preparedStatements`,
 * on by default). The apps here have a pool of one connection, so the test's own queries run in the relay's
 * session and see what it prepared.
 */
describe("the relay's prepared statements (the claim's fan-out, a batch's outcome)", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function withApp(
    preparedStatements: boolean | undefined,
    work: (t: TestApp, seen: Seen) => Promise<void>,
    policy: Partial<RelayPolicy> = {},
  ): Promise<void> {
    const t = await buildApp({
      url: db.url,
      providers: [Seen, Writer],
      poolSize: 1,
      outbox: { preparedStatements },
      imports: [PolicySwitches.of(policy)],
    });
    try {
      await work(t, t.app.get(Seen));
    } finally {
      await t.close();
    }
  }

  async function enqueue(t: TestApp, count: number): Promise<string[]> {
    return enqueueManyIn(
      t,
      Array.from({ length: count }, (_, i) => ({ eventName: EVENT, payload: { i } })),
    );
  }

  const preparedHere = (t: TestApp): Promise<PreparedRow[]> =>
    t.dataSource.query(
      `select name, generic_plans::int, custom_plans::int, prepare_time::text as prepared_at
         from pg_prepared_statements
        where name like 'outbox\\_%' and name not like 'outbox\\_enqueue\\_%'`,
    );

  it('prepares it once on the connection and runs its generic plan on every claim', async () => {
    await withApp(undefined, async (t, seen) => {
      const first = await enqueue(t, 3);
      expect((await t.relay.runOnce()).succeeded).toBe(3);
      const second = await enqueue(t, 2);
      expect((await t.relay.runOnce()).succeeded).toBe(2);
      expect(seen.ids.sort()).toEqual([...first, ...second].sort());
      const prepared = await preparedHere(t);
      // the claim (the lean one: every consumer here is in-process) and the outcome of a batch of in-process
      // pairs, prepared together, named after one hash
      expect(prepared.map((p) => p.name).sort()).toEqual([
        expect.stringMatching(/^outbox_claim_new_[0-9a-f]{12}$/),
        expect.stringMatching(/^outbox_outcome_[0-9a-f]{12}$/),
      ]);
      expect(prepared[0]!.name.slice(-12)).toBe(prepared[1]!.name.slice(-12));
      for (const statement of prepared) {
        expect(statement.custom_plans).toBe(0);
        expect(statement.generic_plans).toBeGreaterThanOrEqual(1);
      }
    });
  });

  it("prepares a writing handler's context too, once per connection (with a savepoint per handler)", async () => {
    for (const preparedStatements of [true, false]) {
      // as a batch runs again after a writing handler failed (ADR 1001): the optimistic run sends no handler context
      const policy = { optimisticBatches: false };
      await withApp(
        preparedStatements,
        async (t) => {
          for (const count of [3, 2]) {
            const ids = await enqueueManyIn(
              t,
              Array.from({ length: count }, (_, i) => ({ eventName: WRITTEN, payload: { i } })),
            );
            expect((await t.relay.runOnce()).succeeded).toBe(count);
            expect(t.app.get(Writer).ids.slice(-count)).toEqual(ids);
          }
          const prepared = await preparedHere(t);
          if (preparedStatements) {
            const contexts = prepared.filter((p) => p.name.startsWith('outbox_handler_context_'));
            // one name, the generation's hash of the fan-out's and the outcome's, run for each of the 5 handlers
            expect(contexts).toEqual([
              expect.objectContaining({
                name: expect.stringMatching(/^outbox_handler_context_[0-9a-f]{12}$/),
              }),
            ]);
            expect(contexts[0]!.generic_plans + contexts[0]!.custom_plans).toBe(5);
            expect(prepared.every((p) => p.name.slice(-12) === contexts[0]!.name.slice(-12))).toBe(true);
          } else expect(prepared).toEqual([]);
        },
        policy,
      );
    }
  });

  it('names it anew within about a second of the first time (a new database fills up)', async () => {
    await withApp(undefined, async (t) => {
      await enqueue(t, 1);
      await t.relay.runOnce();
      const claim = async (): Promise<PreparedRow | undefined> =>
        (await preparedHere(t)).find((p) => p.name.startsWith(`${CLAIM_NEW_NAME}_`));
      const first = await claim();
      // the first period is 1 s: well within the deadline
      const again = await waitFor(
        async () => {
          // a claim runs only when there is work
          await enqueue(t, 1);
          await t.relay.runOnce();
          const now = await claim();
          return now && now.name !== first!.name ? now : null;
        },
        { timeoutMs: 5000, intervalMs: 100, message: 'the claim named anew' },
      );
      expect(again.name).toMatch(/^outbox_claim_new_[0-9a-f]{12}$/);
      expect(again.prepared_at).not.toBe(first!.prepared_at);
      // the generation it left is gone from the server
      expect((await preparedHere(t)).map((p) => p.name)).not.toContain(first!.name);
      // planned when named (relay-statements pins how), and the claims go on with it
      expect(again).toMatchObject({ custom_plans: 0 });
      const ids = await enqueue(t, 2);
      expect((await t.relay.runOnce()).succeeded).toBe(2);
      expect(t.app.get(Seen).ids).toEqual(expect.arrayContaining(ids));
    });
  });

  it('prepares it again when the session lost it (discard all, or another server behind a pooler)', async () => {
    await withApp(undefined, async (t, seen) => {
      await enqueue(t, 1);
      expect((await t.relay.runOnce()).succeeded).toBe(1);
      // (enqueue's own insert, named on the same connection, would fail its transaction now: enqueue-statements)
      const ids = await enqueue(t, 4);
      await t.dataSource.query('deallocate all');
      expect(await preparedHere(t)).toEqual([]);
      const round = await t.relay.runOnce();
      expect(round).toMatchObject({ succeeded: 4, failed: 0 });
      expect(seen.ids.slice(-4).sort()).toEqual(ids.sort());
      expect(await preparedHere(t)).toHaveLength(2);
    });
  });

  it('prepares nothing with preparedStatements false', async () => {
    await withApp(false, async (t) => {
      await enqueue(t, 2);
      expect((await t.relay.runOnce()).succeeded).toBe(2);
      expect(await preparedHere(t)).toEqual([]);
    });
  });

  it('refuses a preparedStatements that is not a boolean, and the option where it was, at boot', async () => {
    await expect(
      buildApp({ url: db.url, outbox: { preparedStatements: 'yes' as unknown as boolean } }),
    ).rejects.toThrow(/preparedStatements must be true or false, got "yes"/);
    await expect(
      buildApp({
        url: db.url,
        outbox: { relay: { preparedStatements: false } as OutboxRelayOptions },
      }),
    ).rejects.toThrow(/relay\.preparedStatements is now preparedStatements/);
  });

  /**
   * A generic plan is made without the values, so it cannot know that a CTE returns a handful of rows: joined
   * the usual way, the claimed events would be read by hashing the whole events table. Over tables of some size,
   * it must reach events and deliveries through their indexes. (Over empty tables a plan may still read them
   * whole; the relay names the statement anew after 1, 2, 4, 8 s, and PostgreSQL plans it anew after an ANALYZE of
   * its tables, so such a plan does not outlive their growth long.)
   */
  /** The part of a claim's plan that scans the pending events: its CTE `fresh`. */
  const freshOf = (plan: string): string => {
    const start = plan.indexOf('CTE fresh');
    return plan.slice(start, plan.indexOf('CTE ', start + 1));
  };

  it('has generic plans that read no whole table of events or deliveries', async () => {
    await insertClaimHistory(db, TENANT, EVENT, 'seen');
    await db.sql('analyze');
    const fanOut = fanOutPendingEvents(NAMES, {
      tenantId: TENANT,
      hosted: ['seen'],
      inProcess: ['seen'],
      tenantConsumers: [],
      liveWithinMs: 60_000,
      limit: 100,
      leaseToken: randomUUID(),
      leaseMs: 30_000,
    });
    const fanOutPlan = await genericPlan(fanOut);
    expect(fanOutPlan).toContain('event_outbox_pending_idx');
    // the scan of pending events starts at the claim position (ADR 1206), and each event it passes by is checked
    // for a live lease on its own, in a subplan: not against a hash of the tenant's leases (whose read walks every
    // lease deleted within the lease's length), nor in an anti join, which may read the whole lease table per event
    // (docs/adr/1206-claims-that-start-past-the-settled.md)
    expect(fanOutPlan).toMatch(/Index Cond: \(\(tenant_id = \$1\) AND \(seq >= \$11\)\)/);
    expect(freshOf(fanOutPlan)).toMatch(/SubPlan \d+/);
    expect(freshOf(fanOutPlan)).not.toMatch(/hashed SubPlan|Anti Join/);
    expect(fanOutPlan).not.toMatch(/Seq Scan on (event_outbox|outbox_deliveries)\b/);

    // the lean claim of new events: the same scan of pending events, the same check of live leases
    const leanPlan = await genericPlan(
      claimNewEvents(NAMES, {
        tenantId: TENANT,
        inProcess: ['seen'],
        liveWithinMs: 60_000,
        limit: 100,
        leaseToken: randomUUID(),
        leaseMs: 30_000,
      }),
    );
    expect(leanPlan).toContain('event_outbox_pending_idx');
    expect(leanPlan).toMatch(/Index Cond: \(\(tenant_id = \$1\) AND \(seq >= \$7\)\)/);
    expect(freshOf(leanPlan)).toMatch(/SubPlan \d+/);
    expect(freshOf(leanPlan)).not.toMatch(/hashed SubPlan|Anti Join/);
    expect(leanPlan).not.toMatch(/Seq Scan on (event_outbox|outbox_deliveries)\b/);

    // the due claim (named since ADR 1207's addendum "The due claim"): retries through the due index, expired leases
    // through the lease index, the claimed deliveries and their events through their keys
    const due = claimDueDeliveries(NAMES, {
      tenantId: TENANT,
      consumers: ['seen'],
      limit: 100,
      leaseToken: randomUUID(),
      leaseMs: 30_000,
    });
    expect(due.prepared).toBeDefined();
    const duePlan = await genericPlan(due);
    expect(duePlan).toContain('outbox_deliveries_due_idx');
    expect(duePlan).toContain('outbox_deliveries_lease_idx');
    expect(duePlan).toContain('outbox_deliveries_pkey');
    expect(duePlan).toContain('event_outbox_pkey');
    expect(duePlan).not.toMatch(/Seq Scan on (event_outbox|outbox_deliveries)\b/);

    // the outcome of a batch of pairs: events locked and settled through their primary key, deliveries only inserted
    const events = await db.sql<{ id: string; seq: string }>(
      `select id, seq::text from event_outbox where status = 'pending' order by seq limit 100`,
    );
    const outcome = recordOutcomes(
      NAMES,
      events.map(({ id, seq }) => deliveredPair(id, seq, 'seen')),
      randomUUID(),
      { fenced: true },
    );
    expect(outcome.prepared).toBeDefined();
    const outcomePlan = await genericPlan(outcome);
    expect(outcomePlan).toContain('event_outbox_pkey');
    expect(outcomePlan).not.toMatch(/Seq Scan on (event_outbox|outbox_deliveries)\b/);
  });

  /** The plan PostgreSQL makes for the statement without its values, as the relay runs it. */
  async function genericPlan(statement: SqlStatement): Promise<string> {
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      // every parameter has its type in the text: no list of types
      await client.query(`prepare outbox_test_plan as ${statement.text}`);
      await client.query('begin');
      await client.query(`set local plan_cache_mode = force_generic_plan`);
      // a generic plan does not depend on the values: nulls of the statement's own types, but for the claims' floor
      // (the nil id: no bound), which in the partitioned layout prunes at the executor's start (a null, every range)
      const args = statement.values.map((v) => (v === NIL_UUID ? `'${NIL_UUID}'` : 'null'));
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `explain (costs off) execute outbox_test_plan(${args.join(', ')})`,
      );
      await client.query('rollback');
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await client.end();
    }
  }
});
