import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  OUTBOX_DEFAULTS,
  OnOutboxEvent,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { claimNewEvents, outboxNames, setTransactionContext } from '../../libs/outbox/src/store/sql';
import { NIL_UUID } from '../../libs/outbox/src/model/outbox.constants';
import { OUTBOX_STORE_PORT } from '../../libs/outbox/src/store/outbox-store.port';
import type { PgRelayStore } from '../../libs/outbox/src/store/pg-relay-store';
import type { OutboxStore } from '../../libs/outbox/src/store/outbox.store';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, enqueueManyIn, TENANT } from '../support/outbox-fixture';

/** The outbox's names in the default schema, which these statements run against. */
const NAMES = outboxNames();
const EVENT = 'test.jit.v1';

/** Reads, in the batch transaction it runs in, whether PostgreSQL may JIT-compile its plans. */
@Injectable()
class JitProbe {
  readonly seen: string[] = [];

  @OnOutboxEvent(EVENT, { consumer: 'jit-probe' })
  async handle(_event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    const [{ jit }] = await context.manager.query<{ jit: string }[]>(`select current_setting('jit') as jit`);
    this.seen.push(jit);
  }
}

/**
 * PostgreSQL JIT-compiles a plan whose estimated cost passes `jit_above_cost` (on by default where PostgreSQL
 * is built with LLVM, as Debian's packages are). The relay's statements are small but their estimates are not
 * (a generic plan's least of all), and a plan is compiled on each of its executions
 * (docs/adr/0605-no-jit-and-asynchronous-commit-for-the-claim.md). The relay turns JIT off in its own
 * transactions. Here the database asks for JIT on every statement (all thresholds at 0), so any plan the relay
 * runs with JIT would show it. A server without LLVM (the embedded one) never compiles, so there the spec checks
 * the setting the relay's claim and outcome run under (a trigger reads it) and says the plan check was not made.
 */
describe('JIT compilation in the relay', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    await db.sql(
      `alter database ${db.name} set jit_above_cost = 0; alter database ${db.name} set jit_inline_above_cost = 0;
       alter database ${db.name} set jit_optimize_above_cost = 0`,
    );
    // Records, from inside each statement that writes an event or an event lease, the jit setting of the
    // transaction it runs in: what the relay's claim and outcome run under, whether or not this server can JIT.
    await db.sql(
      `create table jit_probe (seq bigserial primary key, tbl text not null, op text not null, jit text not null);
       create function jit_probe_record() returns trigger language plpgsql as $$
         begin
           -- the table, not its partition in the partitioned layout (OUTBOX_TEST_PARTITIONED, docs/partitioning.md)
           insert into jit_probe (tbl, op, jit)
           values (regexp_replace(tg_table_name, '_(p[0-9]{8}t[0-9]{4}|default)$', ''), tg_op, current_setting('jit'));
           return null;
         end $$;
       create trigger jit_probe after insert or update on ${NAMES.eventLeases}
         for each row execute function jit_probe_record();
       create trigger jit_probe after insert or update on ${NAMES.events}
         for each row execute function jit_probe_record();`,
    );
    // a pool of one: the test's own queries below run in the session where the relay prepared its claim
    t = await buildApp({ url: db.url, providers: [JitProbe], poolSize: 1 });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it('is off in the transactions where handlers run, though the database turns it on', async () => {
    expect(await t.dataSource.query(`select current_setting('jit') as jit`)).toEqual([{ jit: 'on' }]);
    await enqueueManyIn(
      t,
      [1, 2, 3].map((i) => ({ eventName: EVENT, payload: { i } })),
    );
    expect((await t.relay.runOnce()).succeeded).toBe(3);
    expect(t.app.get(JitProbe).seen).toEqual(['off', 'off', 'off']);
  });

  it("is off in the relay's transactions of one statement: the due-tenant scan, promotions", async () => {
    // the setting each transaction ran under, read by a statement added at its end (what the relay sends is
    // unchanged before it): the due-tenant scan's plan, cached as a generic one, is estimated above
    // jit_above_cost and was compiled on every call (ADR 1206, addendum on the 10-minute hold)
    const relayStore = t.app.get(OUTBOX_STORE_PORT) as PgRelayStore;
    const store = relayStore['store'] as OutboxStore;
    const atomically = store.atomically.bind(store);
    const seen: unknown[] = [];
    const spy = jest.spyOn(store, 'atomically').mockImplementation(async (statements, bound) => {
      const rows = await atomically(
        [...statements, { text: `select current_setting('jit') as jit`, values: [] }],
        bound,
      );
      seen.push(rows[rows.length - 1]);
      return rows.slice(0, -1);
    });
    try {
      await relayStore.dueTenants({ limit: 10, after: null });
      await relayStore.promoteScheduled({ limit: 10 });
    } finally {
      spy.mockRestore();
    }
    expect(seen).toEqual([[{ jit: 'off' }], [{ jit: 'off' }]]);
  });

  it("compiles nothing when the claim's prepared plan runs as the relay runs it", async () => {
    await db.sql('truncate jit_probe');
    await enqueueIn(t, { eventName: EVENT, payload: { i: 4 } });
    expect((await t.relay.runOnce()).succeeded).toBe(1);
    // Checked on every server, LLVM or not: the claim (which leases the event) and the outcome (which marks it
    // published) ran with jit off; the enqueue, in the app's own transaction, with the database's jit on (so
    // the probe can tell).
    const probed = await db.sql<{ tbl: string; op: string; jit: string }>(
      'select tbl, op, jit from jit_probe order by seq',
    );
    expect(probed).toEqual([
      { tbl: 'event_outbox', op: 'INSERT', jit: 'on' },
      { tbl: 'outbox_event_leases', op: 'INSERT', jit: 'off' },
      ...probed.slice(2).map(() => expect.objectContaining({ jit: 'off' })),
    ]);
    expect(probed).toContainEqual({ tbl: 'event_outbox', op: 'UPDATE', jit: 'off' });
    const [prepared] = await t.dataSource.query<{ name: string }[]>(
      `select name from pg_prepared_statements where name like 'outbox\\_claim\\_new\\_%'`,
    );
    // the lean claim: this app's only consumer is in-process
    const claim = claimNewEvents(NAMES, {
      tenantId: TENANT,
      inProcess: ['jit-probe'],
      liveWithinMs: 60_000,
      limit: 100,
      leaseToken: randomUUID(),
      leaseMs: 30_000,
    });
    // the statement the relay named on this session, not one prepared for the test
    expect(prepared?.name).toMatch(new RegExp(`^${claim.prepared!}_[0-9a-f]{12}$`));
    const [{ available }] = await t.dataSource.query<{ available: boolean }[]>(
      `select pg_jit_available() as available`,
    );
    const runner = t.dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      const context = setTransactionContext(OUTBOX_DEFAULTS.tenantSetting, TENANT, 30_000, {
        durable: false,
      });
      await runner.query(context.text, context.values);
      await runner.query(`set local plan_cache_mode = force_generic_plan`);
      // a generic plan does not depend on the values: nulls of the statement's own types, but for the claims' floor
      // (the nil id: no bound), which in the partitioned layout prunes at the executor's start (a null, every range)
      const args = claim.values.map((v) => (v === NIL_UUID ? `'${NIL_UUID}'` : 'null'));
      const plan: { 'QUERY PLAN': string }[] = await runner.query(
        `explain execute ${prepared!.name}(${args.join(', ')})`,
      );
      const text = plan.map((row) => row['QUERY PLAN']).join('\n');
      expect(text).toContain('event_outbox_pending_idx');
      // Where PostgreSQL has LLVM it would compile this plan here, unless jit is off (EXPLAIN prints its JIT
      // summary only with costs). Where it has none (the embedded server), no plan is ever compiled: the plan
      // cannot tell, and the setting checked above is what there is to check.
      if (available) expect(text).not.toMatch(/^JIT:/m);
      else
        console.warn(
          'relay-jit: this PostgreSQL has no JIT (pg_jit_available() is false), so the claim plan cannot show ' +
            'a JIT summary; checked instead that the claim and outcome transactions run with jit off. Run with ' +
            'DATABASE_URL on a server built with LLVM (e.g. Debian PostgreSQL 15) for the plan check too.',
        );
      await runner.rollbackTransaction();
    } finally {
      await runner.release();
    }
  });
});
