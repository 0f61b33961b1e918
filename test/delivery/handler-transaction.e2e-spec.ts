import { Injectable } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { OnOutboxEvent, OutboxService, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { EFFECTS_TABLE_SQL, enqueueIn, recordEffect } from '../support/outbox-fixture';

/** Handlers that use `context.manager` in the ways real code does, including the awkward ones. */
@Injectable()
class ManagerUsers {
  lateQuery: Promise<unknown> | null = null;
  /** Whether the late query settled while the batch transaction was still open (`witness` waited for it). */
  lateSettledInBatch = false;
  private releaseLate: (() => void) | null = null;

  @OnOutboxEvent('test.nested.v1', { consumer: 'nested' })
  async nested(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.transaction(async (inner) => {
      await inner.query('insert into test_effects (event_id, consumer, attempt) values ($1, $2, $3)', [
        event.eventId,
        'nested',
        context.attempt,
      ]);
    });
  }

  constructor(private readonly outbox: OutboxService) {}

  /** Chains: enqueues a follow-up event in the delivery's transaction. */
  @OnOutboxEvent('test.chain.v1', { consumer: 'chainer' })
  async chain(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await this.outbox.enqueue(context.manager, {
      tenantId: event.tenantId,
      eventName: 'test.chained.v1',
      payload: { after: event.eventId },
    });
  }

  /** Each step enqueues the next, up to `last`. */
  @OnOutboxEvent('test.step.v1', { consumer: 'stepper' })
  async step(
    event: OutboxEvent<{ step: number; last: number }>,
    context: OutboxHandlerContext,
  ): Promise<void> {
    await recordEffect(event, context);
    const { step, last } = event.data;
    if (step < last) {
      await this.outbox.enqueue(context.manager, {
        tenantId: event.tenantId,
        eventName: 'test.step.v1',
        payload: { step: step + 1, last },
      });
    }
  }

  @OnOutboxEvent('test.chained.v1', { consumer: 'chained' })
  chained(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent('test.swallowed.v1', { consumer: 'swallows-db-error', maxAttempts: 1 })
  async swallow(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
    // A failed statement aborts the transaction; catching the error does not undo that.
    await context.manager.query('select * from no_such_table').catch(() => undefined);
  }

  @OnOutboxEvent('test.swallowed.v1', { consumer: 'bystander' })
  bystander(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  typedRows: unknown[] = [];
  conflict: unknown = null;

  /** Its first query holds values of every kind (relay-statements pins the round trip it travels in). */
  @OnOutboxEvent('test.typed.v1', { consumer: 'typed' })
  async typed(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    this.typedRows.push(...(await context.manager.query(TYPED_SQL, TYPED_VALUES)));
    await context.manager.query('update typed_values set bin = $1 where t = $2', [BYTES, TYPED_VALUES[0]]);
  }

  /** Its first query holds a Buffer (sent in binary): it goes with its savepoint all the same. */
  @OnOutboxEvent('test.binary.v1', { consumer: 'binary' })
  async binary(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query(`insert into typed_values (t, bin) values ($1, $2)`, [event.eventId, BYTES]);
  }

  @OnOutboxEvent('test.conflict.v1', { consumer: 'conflicting', maxAttempts: 1 })
  async conflicting(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await context.manager.query('insert into unique_keys (k) values ($1)', ['taken']).catch((error) => {
      this.conflict = error;
    });
  }

  @OnOutboxEvent('test.late.v1', { consumer: 'late' })
  async late(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    // Not awaited: the query goes once this handler has returned, while its batch goes on (see `witness`).
    const gate = new Promise<void>((resolve) => (this.releaseLate = resolve));
    this.lateQuery = gate.then(() => recordEffect(event, context)).catch((error) => error);
  }

  /** The event's next handler (pairs run in name order): lets the late query go, in the open batch. */
  @OnOutboxEvent('test.late.v1', { consumer: 'witness' })
  async witness(): Promise<void> {
    if (!this.releaseLate || !this.lateQuery) throw new Error('witness ran before late');
    this.releaseLate();
    await this.lateQuery;
    this.lateSettledInBatch = true;
  }
}

const TYPED_SQL = `insert into typed_values (t, n, f, b, ts, arr, j, nothing) values ($1, $2, $3, $4, $5, $6, $7, $8)
  returning t, n, f, b, ts, arr, j, nothing`;
const TYPED_VALUES = [
  String.raw`it's "quoted" \ $1 -- /* ünï 𝄞`,
  -42,
  1.5,
  false,
  new Date('2026-01-02T03:04:05.678Z'),
  ['a', null, 'b,c', `q"'`],
  { nested: ["x'y", 2], none: null },
  null,
];
const BYTES = Buffer.from([0, 1, 39, 92, 255]);

describe('context.manager', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      `create table typed_values (t text, n int, f float8, b boolean, ts timestamptz, arr text[], j jsonb, nothing text, bin bytea)`,
      `create table unique_keys (k text primary key)`,
      `insert into unique_keys (k) values ('taken')`,
    ]);
    t = await buildApp({ url: db.url, providers: [ManagerUsers] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  const enqueue = (eventName: string) => enqueueIn(t, { eventName });

  it('supports a nested transaction inside the handler, committed with the delivery', async () => {
    const id = await enqueue('test.nested.v1');
    expect(await t.relay.drain()).toMatchObject({ succeeded: 1, failed: 0 });
    expect(await db.sql('select consumer from test_effects where event_id = $1', [id])).toEqual([
      { consumer: 'nested' },
    ]);
  });

  it('lets a handler enqueue a follow-up event through context.manager, committed with the delivery', async () => {
    const id = await enqueue('test.chain.v1');
    expect(await t.relay.drain()).toMatchObject({ succeeded: 2, failed: 0, dead: 0 });
    const [followUp] = await db.sql<{ id: string; status: string }>(
      `select id, status from event_outbox where payload->>'after' = $1`,
      [id],
    );
    expect(followUp).toMatchObject({ status: 'published' });
    expect(await db.sql('select consumer from test_effects where event_id = $1', [followUp!.id])).toEqual([
      { consumer: 'chained' },
    ]);
  });

  it('drains a chain of events each enqueued by the previous one’s handler, in one drain()', async () => {
    // Each batch's commit overlaps the next claim: drain() must still see what a commit made due.
    await enqueueIn(t, { eventName: 'test.step.v1', payload: { step: 1, last: 12 } });
    expect(await t.relay.drain()).toMatchObject({ succeeded: 12, failed: 0 });
    const published = `select count(*)::int as n from event_outbox where event_name = 'test.step.v1' and status = 'published'`;
    expect(await db.sql(published)).toEqual([{ n: 12 }]);
  });

  it('fails a handler that swallowed a database error, rolls back its writes, and keeps the other handlers’ writes', async () => {
    const id = await enqueue('test.swallowed.v1');
    const round = await t.relay.drain();
    expect(round).toMatchObject({ succeeded: 1, dead: 1 });
    expect(await db.sql('select consumer from test_effects where event_id = $1', [id])).toEqual([
      { consumer: 'bystander' },
    ]);
    const [row] = await db.sql<{ status: string; last_error: string }>(
      `select status, last_error from outbox_deliveries where event_id = $1 and consumer_name = 'swallows-db-error'`,
      [id],
    );
    expect(row!.status).toBe('dead');
    expect(row!.last_error).toMatch(/aborted|no_such_table/);
  });

  it('gives a handler’s first query its values as the driver sends them, and returns its rows as TypeORM does', async () => {
    const id = await enqueue('test.typed.v1');
    expect(await t.relay.drain()).toMatchObject({ succeeded: 1, failed: 0 });
    const direct = await t.dataSource.transaction(async (m) => {
      const rows = await m.query(TYPED_SQL, TYPED_VALUES);
      await m.query(
        'delete from typed_values where ctid in (select ctid from typed_values order by ctid desc limit 1)',
      );
      return rows;
    });
    expect(t.app.get(ManagerUsers).typedRows).toEqual(direct);
    expect(await db.sql('select bin from typed_values where t = $1', [TYPED_VALUES[0]])).toEqual([
      { bin: BYTES },
    ]);
    expect(id).toBeTruthy();
  });

  it('writes a first query whatever its values (binary ones included)', async () => {
    const id = await enqueue('test.binary.v1');
    expect(await t.relay.drain()).toMatchObject({ succeeded: 1, failed: 0 });
    expect(await db.sql('select bin from typed_values where t = $1', [id])).toEqual([{ bin: BYTES }]);
  });

  it('gives a failing first query TypeORM’s QueryFailedError, and fails the handler that swallowed it', async () => {
    await enqueue('test.conflict.v1');
    expect(await t.relay.drain()).toMatchObject({ succeeded: 0, dead: 1 });
    const conflict = t.app.get(ManagerUsers).conflict;
    expect(conflict).toBeInstanceOf(QueryFailedError);
    expect((conflict as QueryFailedError).driverError).toMatchObject({ code: '23505' });
    expect((conflict as QueryFailedError).query).toBe('insert into unique_keys (k) values ($1)');
  });

  it('refuses queries made through context.manager after the handler returned', async () => {
    const id = await enqueue('test.late.v1');
    expect(await t.relay.drain()).toMatchObject({ succeeded: 2, failed: 0 });
    expect(t.app.get(ManagerUsers).lateSettledInBatch).toBe(true);
    const error = await t.app.get(ManagerUsers).lateQuery;
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain('after it returned');
    expect(await db.sql('select * from test_effects where event_id = $1', [id])).toEqual([]);
  });
});
