import { Injectable } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { Logger as TypeOrmLogger } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxError,
  OutboxService,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { enqueueIn, enqueueManyIn, TENANT, truncateOutbox } from '../support/outbox-fixture';

const EVENT = 'test.enqueue-statements.v1';
const FOLLOW_UP = 'test.enqueue-statements.follow-up.v1';

/** A handler that enqueues a follow-up in its batch transaction (`context.manager`). */
@Injectable()
class Chainer {
  constructor(private readonly outbox: OutboxService) {}

  @OnOutboxEvent(EVENT, { consumer: 'chainer' })
  async chain(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await this.outbox.enqueue(context.manager, {
      tenantId: event.tenantId,
      eventName: FOLLOW_UP,
      payload: { after: event.eventId },
    });
  }
}

/** The DataSource's logger, as TypeORM calls it: what an app's query log would show. */
class RecordingLogger implements TypeOrmLogger {
  readonly queries: string[] = [];
  readonly errors: string[] = [];
  logQuery(query: string): void {
    this.queries.push(query);
  }
  logQueryError(error: string | Error, query: string): void {
    this.errors.push(query);
  }
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

/**
 * `enqueue`'s insert is a named statement on the app's connections (`preparedStatements`): pg parses it once per
 * connection, and PostgreSQL neither parses nor plans it again. What the server holds is read here; the
 * statements sent, by name and text, are pinned in relay-statements.e2e-spec.ts.
 */
describe("enqueue's insert as a named statement", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase(['create table test_written (id int primary key)']);
  });
  afterAll(async () => {
    await db?.drop();
  });
  beforeEach(() => truncateOutbox(db, 'test_written'));

  async function withApp(
    preparedStatements: boolean | undefined,
    work: (t: TestApp, logger: RecordingLogger) => Promise<void>,
  ): Promise<void> {
    const logger = new RecordingLogger();
    const t = await buildApp({
      url: db.url,
      typeorm: false,
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url, extra: { max: 1 }, logger })],
      providers: [Chainer],
      // no wake-up NOTIFY on the pool's one connection
      outbox: { preparedStatements, relay: { wakeUps: 'off' } },
    });
    try {
      await work(t, logger);
    } finally {
      await t.close();
    }
  }

  const enqueueNames = async (t: TestApp): Promise<{ name: string; runs: number }[]> =>
    t.dataSource.query(
      `select name, (generic_plans + custom_plans)::int as runs
         from pg_prepared_statements where name like 'outbox\\_enqueue\\_%' order by name`,
    );

  it('parses the insert once per connection, for enqueue and for enqueueMany, and logs it as TypeORM would', async () => {
    await withApp(undefined, async (t, logger) => {
      const ids = [
        await enqueueIn(t, { eventName: EVENT, payload: { i: 1 } }),
        await enqueueIn(t, { eventName: EVENT, payload: { i: 2 } }),
        await enqueueIn(t, { eventName: EVENT, payload: { i: 3 } }),
        ...(await enqueueManyIn(t, [{ eventName: EVENT }, { eventName: EVENT }])),
        ...(await enqueueManyIn(t, [{ eventName: EVENT }])),
      ];
      // one name per text (enqueue's and enqueueMany's), each parsed once and run again
      expect(await enqueueNames(t)).toEqual([
        { name: expect.stringMatching(/^outbox_enqueue_/), runs: expect.any(Number) },
        { name: expect.stringMatching(/^outbox_enqueue_/), runs: expect.any(Number) },
      ]);
      expect((await enqueueNames(t)).map((s) => s.runs).sort()).toEqual([2, 3]);
      expect(logger.queries.filter((q) => /insert into public\.event_outbox/i.test(q))).toHaveLength(5);
      const [{ n }] = await db.sql<{ n: number }>(
        'select count(*)::int as n from event_outbox where id = any($1::uuid[])',
        [ids],
      );
      expect(n).toBe(6);
    });
  });

  it('sends the insert unnamed with preparedStatements false', async () => {
    await withApp(false, async (t) => {
      await enqueueIn(t, { eventName: EVENT });
      await enqueueManyIn(t, [{ eventName: EVENT }, { eventName: EVENT }]);
      expect(await enqueueNames(t)).toEqual([]);
      expect(await db.sql('select count(*)::int as n from event_outbox')).toEqual([{ n: 3 }]);
    });
  });

  it("writes a handler's follow-up through its batch transaction, not with the app's named insert", async () => {
    await withApp(undefined, async (t) => {
      await enqueueIn(t, { eventName: EVENT });
      const before = await enqueueNames(t);
      expect((await t.relay.runOnce()).succeeded).toBe(1);
      // the one connection's named insert ran no more for it
      expect(await enqueueNames(t)).toEqual(before);
      const [{ n }] = await db.sql<{ n: number }>(
        'select count(*)::int as n from event_outbox where event_name = $1',
        [FOLLOW_UP],
      );
      expect(n).toBe(1);
    });
  });

  it('fails the transaction whose connection lost the insert with a clear error, then runs unnamed', async () => {
    await withApp(undefined, async (t, logger) => {
      await enqueueIn(t, { eventName: EVENT, payload: { i: 1 } });
      expect(await enqueueNames(t)).toHaveLength(1);
      const attempt = t.dataSource.transaction(async (manager) => {
        await manager.query('insert into test_written (id) values (1)');
        // what a pooler that moved the session, or the app's own DISCARD ALL, leaves: pg still thinks it parsed it
        await manager.query('deallocate all');
        await t.outbox.enqueue(manager, { tenantId: TENANT, eventName: EVENT, payload: { i: 2 } });
      });
      await expect(attempt).rejects.toThrow(OutboxError);
      await expect(attempt).rejects.toThrow(
        /no longer had the outbox's named insert \(SQLSTATE 26000.*nothing of it was written.*preparedStatements: false/s,
      );
      expect(logger.errors.filter((q) => /insert into public\.event_outbox/i.test(q))).toHaveLength(1);
      const written = await db.sql<{ n: number }>(
        'select (select count(*) from event_outbox)::int + (select count(*) from test_written)::int as n',
      );
      expect(written[0]!.n).toBe(1);
      // the next enqueues of this app, on the same connection, go unnamed (it names nothing again) and commit
      const again = await enqueueIn(t, { eventName: EVENT, payload: { i: 3 } });
      expect(await enqueueNames(t)).toEqual([]);
      const [{ n }] = await db.sql<{ n: number }>(
        'select count(*)::int as n from event_outbox where id = $1',
        [again],
      );
      expect(n).toBe(1);
    });
  });
});
