import { OutboxError, OutboxValidationError } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_TABLE,
  EFFECTS_TABLE_SQL,
  effectIds,
  TENANT,
  ThingConsumers,
  truncateOutbox,
} from '../support/outbox-fixture';
const event = (...args: unknown[]) => ({
  tenantId: TENANT,
  eventName: 'test.thing.created.v1',
  payload: args.length ? args[0] : { n: 1 },
});

describe('enqueue', () => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase([
      EFFECTS_TABLE_SQL,
      'create table things (id serial primary key, name text not null)',
    ]);
    t = await buildApp({ url: db.url, providers: [ThingConsumers] });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db, EFFECTS_TABLE, 'things');
  });

  const countEvents = async (): Promise<number> =>
    Number((await db.sql<{ n: string }>('select count(*) n from event_outbox'))[0]!.n);

  it('does not relay an event whose transaction rolled back', async () => {
    await expect(
      t.dataSource.transaction(async (manager) => {
        await manager.query(`insert into things (name) values ('rolled back')`);
        await t.outbox.enqueue(manager, event());
        throw new Error('business rule failed');
      }),
    ).rejects.toThrow('business rule failed');
    expect(await countEvents()).toBe(0);
    const round = await t.relay.drain();
    expect(round.eventsClaimed).toBe(0);
    expect(await effectIds(db)).toEqual([]);
  });

  it('relays an event whose transaction committed, with the business row', async () => {
    const id = await t.dataSource.transaction(async (manager) => {
      await manager.query(`insert into things (name) values ('kept')`);
      return t.outbox.enqueue(manager, event({ name: 'kept' }));
    });
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await t.relay.drain();
    expect(await effectIds(db)).toEqual([id]);
    expect(t.app.get(ThingConsumers).memoryCalls).toContain(id);
    expect(
      (await db.sql<{ status: string }>('select status from event_outbox where id = $1', [id]))[0]!.status,
    ).toBe('published');
  });

  it('refuses a manager without an open transaction and writes nothing', async () => {
    await expect(t.outbox.enqueue(t.dataSource.manager, event())).rejects.toThrow(OutboxError);
    await expect(t.outbox.enqueue(t.dataSource.manager, event())).rejects.toThrow(/open transaction/);
    const runner = t.dataSource.createQueryRunner();
    await expect(t.outbox.enqueue(runner.manager, event())).rejects.toThrow(OutboxError);
    await runner.release();
    expect(await countEvents()).toBe(0);
  });

  it('enqueueMany writes every event in order, or none when one is invalid', async () => {
    const ids = await t.dataSource.transaction((m) =>
      t.outbox.enqueueMany(m, [event({ n: 1 }), event({ n: 2 }), event({ n: 3 })]),
    );
    const rows = await db.sql<{ id: string }>('select id from event_outbox order by seq');
    expect(rows.map((r) => r.id)).toEqual(ids);

    await db.sql('truncate event_outbox');
    const failure = t.dataSource.transaction((m) =>
      t.outbox.enqueueMany(m, [event({ n: 1 }), event({ bad: 1n }), event()]),
    );
    await expect(failure).rejects.toMatchObject({
      name: 'OutboxValidationError',
      field: 'events[1].payload.bad',
    });
    expect(await countEvents()).toBe(0);
  });

  describe('rejects bad input before writing, naming the field', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const deep: Record<string, unknown> = {};
    let cursor = deep;
    for (let i = 0; i < 100; i++) cursor = cursor.next = {};
    const cases: [string, Record<string, unknown>, string][] = [
      ['tenant id not a UUID', { ...event(), tenantId: 'tenant-1' }, 'event.tenantId'],
      ['missing tenant id', { ...event(), tenantId: undefined }, 'event.tenantId'],
      ['empty event name', { ...event(), eventName: '' }, 'event.eventName'],
      ['single-word event name', { ...event(), eventName: 'created' }, 'event.eventName'],
      ['upper-case event name', { ...event(), eventName: 'Crm.Contact.Created' }, 'event.eventName'],
      [
        'event name with SQL',
        { ...event(), eventName: "crm.x'; drop table event_outbox; --" },
        'event.eventName',
      ],
      ['BigInt in payload', event({ amount: 10n }), 'event.payload.amount'],
      ['cycle in payload', event(cyclic), 'event.payload.self'],
      ['function in payload', event({ f: () => 1 }), 'event.payload.f'],
      ['undefined payload', event(undefined), 'event.payload'],
      ['undefined inside payload', event({ a: undefined }), 'event.payload.a'],
      ['Date in payload', event({ at: new Date() }), 'event.payload.at'],
      ['Map in payload', event({ m: new Map() }), 'event.payload.m'],
      ['NaN in payload', event({ x: NaN }), 'event.payload.x'],
      ['NUL character in payload', event({ s: 'a\u0000b' }), 'event.payload.s'],
      ['lone surrogate in payload', event({ s: '\ud800' }), 'event.payload.s'],
      ['payload nested too deep', event(deep), 'event.payload'],
      ['payload over the size limit', event({ blob: 'x'.repeat(300 * 1024) }), 'event.payload'],
      ['schema version zero', { ...event(), schemaVersion: 0 }, 'event.schemaVersion'],
      ['invalid occurredAt', { ...event(), occurredAt: new Date('nope') }, 'event.occurredAt'],
      ['aggregate id with a control character', { ...event(), aggregateId: 'a\nb' }, 'event.aggregateId'],
    ];
    it.each(cases)('%s', async (_label, input, field) => {
      const attempt = t.dataSource.transaction((m) => t.outbox.enqueue(m, input as never));
      await expect(attempt).rejects.toBeInstanceOf(OutboxValidationError);
      await expect(
        t.dataSource.transaction((m) => t.outbox.enqueue(m, input as never)),
      ).rejects.toMatchObject({
        field: expect.stringContaining(field),
      });
      expect(await countEvents()).toBe(0);
    });
  });

  it('stores every envelope field it was given', async () => {
    const occurredAt = new Date('2026-01-02T03:04:05.000Z');
    const id = await t.dataSource.transaction((m) =>
      t.outbox.enqueue(m, {
        ...event({ nested: { list: [1, 'two', null, true] } }),
        aggregateType: 'thing',
        aggregateId: 'thing-42',
        correlationId: 'req-7',
        schemaVersion: 3,
        occurredAt,
      }),
    );
    const [row] = await db.sql<Record<string, unknown>>('select * from event_outbox where id = $1', [id]);
    expect(row).toMatchObject({
      tenant_id: TENANT,
      event_name: 'test.thing.created.v1',
      payload: { nested: { list: [1, 'two', null, true] } },
      aggregate_type: 'thing',
      aggregate_id: 'thing-42',
      correlation_id: 'req-7',
      schema_version: 3,
      status: 'pending',
    });
    expect((row!.occurred_at as Date).toISOString()).toBe(occurredAt.toISOString());
  });
});
