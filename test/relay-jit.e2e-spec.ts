import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import {
  OUTBOX_DEFAULTS,
  OnOutboxEvent,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { claimNewEvents, outboxNames, setTransactionContext } from '../libs/outbox/src/store/sql';
import { buildApp, type TestApp } from './support/build-app';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { enqueueIn, enqueueManyIn, TENANT } from './support/outbox-fixture';

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
 * runs with JIT would show it.
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

  it("compiles nothing when the claim's prepared plan runs as the relay runs it", async () => {
    await enqueueIn(t, { eventName: EVENT, payload: { i: 4 } });
    expect((await t.relay.runOnce()).succeeded).toBe(1);
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
      // a generic plan does not depend on the values: nulls of the statement's own types
      const plan: { 'QUERY PLAN': string }[] = await runner.query(
        `explain execute ${prepared!.name}(${claim.values.map(() => 'null').join(', ')})`,
      );
      const text = plan.map((row) => row['QUERY PLAN']).join('\n');
      expect(text).toContain('event_outbox_pending_idx');
      // Where PostgreSQL has no LLVM (the embedded server), it never compiles; where it has, it would here. (EXPLAIN
      // prints its JIT summary only with costs.)
      if (available) expect(text).not.toMatch(/^JIT:/m);
      await runner.rollbackTransaction();
    } finally {
      await runner.release();
    }
  });
});
