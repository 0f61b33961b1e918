import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { within } from '../support/wait-for';
import { effectIds, EFFECTS_TABLE_SQL, enqueueIn, recordEffect } from '../support/outbox-fixture';

const SLEEPING = '71000000-0000-4000-8000-000000000001';
const WAITING = '72000000-0000-4000-8000-000000000002';
const HEALTHY = '73000000-0000-4000-8000-000000000003';
const EVENT = 'test.stuck.v1';
const TIMEOUT_MS = 300;

/** Handlers that take the bound off their own statements first: the relay must stop their sleep all the same. */
const UNBOUNDED: Record<string, (context: OutboxHandlerContext) => Promise<unknown>> = {
  'set local, same text': (c) => c.manager.query('set local statement_timeout = 0; select pg_sleep(30)'),
  'set, same text': (c) => c.manager.query('set statement_timeout = 0; select pg_sleep(30)'),
  'set_config, same text': (c) =>
    c.manager.query(`select set_config('statement_timeout', '0', true); select pg_sleep(30)`),
  // two queries sent together: the bound the relay sends before the second may reach the server first
  'set_config, alongside': (c) =>
    Promise.all([
      c.manager.query(`select set_config('statement_timeout', '0', true)`),
      c.manager.query('select pg_sleep(30)'),
    ]),
};

/** By the event's kind: a query that sleeps far past the handler's timeout, a lock wait that never ends, or an effect. */
@Injectable()
class StuckHandlers {
  @OnOutboxEvent(EVENT, { consumer: 'stuck', timeoutMs: TIMEOUT_MS, maxAttempts: 1 })
  async handle(event: OutboxEvent<{ kind: string }>, context: OutboxHandlerContext): Promise<void> {
    const unbounded = UNBOUNDED[event.data.kind];
    if (unbounded) await unbounded(context);
    else if (event.data.kind === 'sleep') await context.manager.query('select pg_sleep(30)');
    else if (event.data.kind === 'lock') {
      // a first query, then the lock wait: the bound must cover every query, not only the first
      await context.manager.query('select 1');
      await context.manager.query('update locked_rows set n = n + 1');
    } else await recordEffect(event, context);
  }
}

const AFTER_DIRTY = 'test.after-dirty.v1';

/** On each event: one handler changes a session setting (the relay resets it), the other sleeps past its timeout. */
@Injectable()
class DirtyThenSleepy {
  @OnOutboxEvent(AFTER_DIRTY, { consumer: 'dirty', maxAttempts: 1 })
  async dirty(_event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('set search_path = public');
  }

  @OnOutboxEvent(AFTER_DIRTY, { consumer: 'sleepy', timeoutMs: TIMEOUT_MS, maxAttempts: 1 })
  async sleepy(_event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select pg_sleep(30)');
  }
}

/**
 * A handler's timeout stops its running query: one handler sleeping in the database, or waiting for a lock
 * that is never released, delays the relay — every tenant — by its own timeout, not by its query.
 */
describe('a handler whose query outlives its timeout', () => {
  let db: TestDatabase;
  let t: TestApp;
  let holder: Client;
  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      'create table locked_rows (n int not null)',
      'insert into locked_rows values (0)',
    ]);
    t = await buildApp({ url: db.url, providers: [StuckHandlers, DirtyThenSleepy] });
    // an abandoned lock: held by a session that never commits (until the test ends)
    holder = new Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('begin');
    await holder.query('lock table locked_rows in exclusive mode');
  });
  afterAll(async () => {
    await holder?.end();
    await t?.close();
    await db?.drop();
  });

  it('has its query cancelled at its timeout, and the other tenants are served', async () => {
    const enqueue = (tenantId: string, kind: string) =>
      enqueueIn(t, { tenantId, eventName: EVENT, payload: { kind } });
    await enqueue(SLEEPING, 'sleep');
    await enqueue(WAITING, 'lock');
    const healthy = await enqueue(HEALTHY, 'effect');
    // 10 s: far more than three handler timeouts, far less than the sleep or the lock wait
    const round = await within(10_000, t.relay.drain(), 'drain()');
    expect(round).toMatchObject({ succeeded: 1, dead: 2 });
    expect(await effectIds(db)).toEqual([healthy]);
    const stuck = await db.sql<{ tenant_id: string; error_code: string }>(
      `select tenant_id, error_code from outbox_deliveries where status = 'dead' order by tenant_id`,
    );
    expect(stuck).toEqual([
      { tenant_id: SLEEPING, error_code: 'timeout' },
      { tenant_id: WAITING, error_code: 'timeout' },
    ]);
    // nothing of theirs still runs on the server
    expect(
      await db.sql(
        `select count(*)::int as n from pg_stat_activity
          where pid <> pg_backend_pid() and state = 'active' and (query like '%pg_sleep(30)%' or query like '%update locked_rows%')`,
      ),
    ).toEqual([{ n: 0 }]);
  });

  it('has its query stopped at its timeout even when the handler took the bound off', async () => {
    const kinds = Object.keys(UNBOUNDED);
    const tenants = kinds.map((_, i) => `74000000-0000-4000-8000-00000000000${i}`);
    for (const [i, kind] of kinds.entries())
      await enqueueIn(t, { tenantId: tenants[i], eventName: EVENT, payload: { kind } });
    // 10 s: far more than four handler timeouts, far less than the sleeps
    const round = await within(10_000, t.relay.drain(), 'drain()');
    expect(round).toMatchObject({ succeeded: 0, dead: kinds.length });
    const stuck = await db.sql<{ tenant_id: string; error_code: string }>(
      `select tenant_id, error_code from outbox_deliveries where tenant_id = any($1::uuid[]) order by tenant_id`,
      [tenants],
    );
    expect(stuck).toEqual(tenants.map((tenant_id) => ({ tenant_id, error_code: 'timeout' })));
    expect(
      await db.sql(
        `select count(*)::int as n from pg_stat_activity
          where pid <> pg_backend_pid() and state = 'active' and query like '%pg_sleep(30)%'`,
      ),
    ).toEqual([{ n: 0 }]);
  });

  it('keeps its bound after a handler before it changed the session (the relay resets it first)', async () => {
    // two events: whatever order the two consumers run in, a sleeping handler follows a resetting one
    for (let i = 0; i < 2; i++)
      await enqueueIn(t, { tenantId: HEALTHY, eventName: AFTER_DIRTY, payload: { i } });
    // 10 s: far more than two handler timeouts, far less than the sleep
    const round = await within(10_000, t.relay.drain(), 'drain()');
    expect(round).toMatchObject({ succeeded: 2, dead: 2 });
    expect(
      await db.sql(
        `select consumer_name, status, error_code from outbox_deliveries where consumer_name = 'sleepy' order by id`,
      ),
    ).toEqual([
      { consumer_name: 'sleepy', status: 'dead', error_code: 'timeout' },
      { consumer_name: 'sleepy', status: 'dead', error_code: 'timeout' },
    ]);
  });
});
