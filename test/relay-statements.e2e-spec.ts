import { Injectable } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AbstractLogger, type LogLevel, type LogMessage } from 'typeorm';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from './support/build-app';
import { RoundTripProbe } from './support/round-trip-probe';
import { createTestDatabase, type TestDatabase } from './support/test-database';

const TENANT = '77777777-7777-4777-8777-777777777777';

/** Throws the message its event carries: the relay records it as the delivery's last error. */
@Injectable()
class Thrower {
  @OnOutboxEvent('test.throw.v1', { consumer: 'thrower', maxAttempts: 5 })
  handle(event: OutboxEvent<{ message: string }>): void {
    throw new Error(event.data.message);
  }
}

/** Sleeps in the database, through the batch transaction: its first query travels with the savepoint. */
@Injectable()
class Sleeper {
  @OnOutboxEvent('test.sleep.v1', { consumer: 'sleeper' })
  async handle(_event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('select pg_sleep(0.05)');
  }
}

/** Keeps what TypeORM's slow-query log is told. */
class SlowQueries extends AbstractLogger {
  readonly slow: { time: number; query: string }[] = [];

  override logQuerySlow(time: number, query: string): void {
    this.slow.push({ time, query });
  }

  protected writeLog(_level: LogLevel, _message: LogMessage | LogMessage[]): void {}
}

/**
 * The relay sends each transaction's statements together in one round trip (pg's pipeline mode), values as
 * bound parameters. Whatever a value holds, it must reach the table as it was, and never be read as SQL.
 */
describe('relay statements sent in one round trip', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({ url: db.url, providers: [Thrower] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it.each([
    ['quotes', `it's "quoted"`],
    ['backslashes', String.raw`C:\temp\new \' \\`],
    ['SQL in the text', `'); drop table event_outbox; -- $1 $2 /* */ $$ ;commit;`],
    ['unicode', 'ünïcødé ✓ 𝄞 — 北京'],
    ['a parameter marker', '$1'],
  ])('records an error with %s exactly as thrown', async (_, message) => {
    const id = await t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId: TENANT, eventName: 'test.throw.v1', payload: { message } }),
    );
    const round = await t.relay.runOnce();
    expect(round.failed).toBe(1);
    const [row] = await db.sql<{ last_error: string; error_code: string }>(
      'select last_error, error_code from outbox_deliveries where event_id = $1',
      [id],
    );
    expect(row).toEqual({ last_error: `Error: ${message}`, error_code: 'handlerError' });
    expect(await db.sql('select count(*)::int as n from event_outbox')).not.toEqual([{ n: 0 }]);
  });

  it('sends every value as a bound parameter, never in the text of a statement', async () => {
    const probe = RoundTripProbe.attach(t.dataSource);
    const message = `'); select 'injected' -- ${'x'.repeat(8)}`;
    await t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId: TENANT, eventName: 'test.throw.v1', payload: { message } }),
    );
    expect((await t.relay.runOnce()).failed).toBe(1);
    probe.detach();
    const sent = probe.take().statements;
    expect(sent.some((s) => s.values.some((v) => Array.isArray(v) && v.includes(`Error: ${message}`)))).toBe(
      true,
    );
    expect(sent.filter((s) => s.text.includes(message) || s.text.includes(TENANT))).toEqual([]);
  });
});

describe('statements sent in one round trip and TypeORM options', () => {
  let db: TestDatabase;
  let t: TestApp;
  const logger = new SlowQueries();
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({
      url: db.url,
      typeorm: false,
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url, maxQueryExecutionTime: 20, logger })],
      providers: [Sleeper],
    });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  it("reports a handler's slow first query to the slow-query log, as TypeORM's own query() does", async () => {
    await t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, { tenantId: TENANT, eventName: 'test.sleep.v1', payload: {} }),
    );
    expect((await t.relay.runOnce()).succeeded).toBe(1);
    const sleeps = logger.slow.filter((s) => s.query.includes('pg_sleep'));
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]!.time).toBeGreaterThan(20);
    // shown as written: TypeORM's own query() sent it, right after the savepoint that went with it
    expect(sleeps[0]!.query).toBe('select pg_sleep(0.05)');
  });
});
