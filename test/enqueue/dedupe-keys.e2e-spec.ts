import { Injectable } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { OnOutboxEvent, OutboxRetention, OutboxValidationError, type OutboxEvent } from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import { TENANT, TENANTS, truncateOutbox } from '../support/outbox-fixture';
import { waitFor, within } from '../support/wait-for';

const NAME = 'test.dedupe.created.v1';
const OTHER_NAME = 'test.dedupe.updated.v1';

/** Records what each delivery carried. */
@Injectable()
class PayloadConsumer {
  readonly seen: { id: string; data: unknown }[] = [];

  @OnOutboxEvent('test.dedupe.*')
  record(event: OutboxEvent): void {
    this.seen.push({ id: event.eventId, data: event.data });
  }
}

type Dedupe = { key: string; mode?: 'ignore' | 'replace' | 'debounce'; windowMs?: number };
const keyed = (dedupe: Dedupe, payload: unknown = { n: 1 }, more: Record<string, unknown> = {}) => ({
  tenantId: TENANT,
  eventName: NAME,
  payload,
  dedupe,
  ...more,
});

describe('idempotency keys (dedupe)', () => {
  let db: TestDatabase;
  let t: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase();
    t = await buildApp({ url: db.url, providers: [PayloadConsumer], poolSize: 12 });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateOutbox(db);
    t.app.get(PayloadConsumer).seen.length = 0;
  });

  const events = () =>
    db.sql<{
      id: string;
      payload: unknown;
      dedupe_key: string | null;
      tenant_id: string;
      event_name: string;
    }>('select id, payload, dedupe_key, tenant_id, event_name from event_outbox order by seq');
  const keys = () =>
    db.sql<{ dedupe_key: string; event_id: string }>(
      'select dedupe_key, event_id from outbox_dedupe_keys order by dedupe_key',
    );
  const inTx = <T>(work: (runner: QueryRunner) => Promise<T>): Promise<T> =>
    t.dataSource.transaction((manager) => work(manager.queryRunner!));

  it('ignores a second enqueue of a key: returns the first event id and writes one event', async () => {
    const first = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'order-1' }, { n: 1 })));
    const second = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'order-1' }, { n: 2 })));
    expect(first).toEqual({ eventId: expect.stringMatching(/^[0-9a-f-]{36}$/), outcome: 'written' });
    expect(second).toEqual({ eventId: first.eventId, outcome: 'ignored' });
    expect(await events()).toEqual([
      { id: first.eventId, payload: { n: 1 }, dedupe_key: 'order-1', tenant_id: TENANT, event_name: NAME },
    ]);
    // an event without a key still gets its id back, as a string
    const id = await inTx((r) => t.outbox.enqueue(r, { tenantId: TENANT, eventName: NAME, payload: {} }));
    expect(typeof id).toBe('string');
    await t.relay.drain();
    expect(t.app.get(PayloadConsumer).seen.map((s) => s.id)).toEqual([first.eventId, id]);
    // the admin service (and the board's event page) show the key
    const admin = t.app.get(OutboxAdminService);
    expect((await admin.deliveries(TENANT, first.eventId))?.dedupeKey).toBe('order-1');
    expect((await admin.deliveries(TENANT, id))?.dedupeKey).toBeNull();
  });

  it('replaces the payload of an event no relay has claimed, and delivers the replaced payload once', async () => {
    const first = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'cart-7' }, { items: 1 })));
    const second = await inTx((r) =>
      t.outbox.enqueue(r, keyed({ key: 'cart-7', mode: 'replace' }, { items: 2 }, { schemaVersion: 2 })),
    );
    expect(second).toEqual({ eventId: first.eventId, outcome: 'replaced' });
    const [row] = await db.sql<{ payload: unknown; schema_version: number }>(
      'select payload, schema_version from event_outbox',
    );
    expect(row).toEqual({ payload: { items: 2 }, schema_version: 2 });
    await t.relay.drain();
    expect(t.app.get(PayloadConsumer).seen).toEqual([{ id: first.eventId, data: { items: 2 } }]);
  });

  it('keeps the payload of an event a relay has delivered or holds a claim on, and says so', async () => {
    const delivered = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'a' }, { v: 'first' })));
    await t.relay.drain();
    const late = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'a', mode: 'replace' }, { v: 'late' })));
    expect(late).toEqual({ eventId: delivered.eventId, outcome: 'kept' });

    // claimed but not settled: the event is still pending, under a lease
    const claimed = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'b' }, { v: 'first' })));
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       values ($1, $2, gen_random_uuid(), now() + interval '1 minute')`,
      [claimed.eventId, TENANT],
    );
    const during = await inTx((r) =>
      t.outbox.enqueue(r, keyed({ key: 'b', mode: 'replace' }, { v: 'during' })),
    );
    expect(during).toEqual({ eventId: claimed.eventId, outcome: 'kept' });
    expect((await events()).map((e) => e.payload)).toEqual([{ v: 'first' }, { v: 'first' }]);
    expect(t.app.get(PayloadConsumer).seen).toEqual([{ id: delivered.eventId, data: { v: 'first' } }]);
  });

  it('lets a key be used again once its window is over', async () => {
    const first = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'k', windowMs: 60_000 })));
    const [key] = await db.sql<{ window: string }>(
      `select (expires_at - created_at)::text as window from outbox_dedupe_keys`,
    );
    expect(key!.window).toBe('00:01:00');
    expect((await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'k' })))).outcome).toBe('ignored');
    await db.sql(`update outbox_dedupe_keys set expires_at = now() - interval '1 second'`);
    const again = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'k' }, { n: 2 })));
    expect(again.outcome).toBe('written');
    expect(again.eventId).not.toBe(first.eventId);
    expect(await keys()).toEqual([{ dedupe_key: 'k', event_id: again.eventId }]);
    expect((await events()).length).toBe(2);
  });

  it('takes a default window of 24 hours', async () => {
    await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'default' })));
    const [key] = await db.sql<{ window: string }>(
      `select (expires_at - created_at)::text as window from outbox_dedupe_keys`,
    );
    expect(key!.window).toBe('1 day');
  });

  describe('with a delay (deliverAt, delayMs)', () => {
    const scheduled = () =>
      db.sql<{ id: string; status: string; due_in_ms: number; payload: unknown }>(
        `select id, status, (extract(epoch from deliver_at - created_at) * 1000)::float8 as due_in_ms, payload
           from event_outbox order by seq`,
      );

    it('writes a keyed delayed event scheduled, as an unkeyed one, and delivers it once after its time', async () => {
      const first = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'later' }, { n: 1 }, { delayMs: 700 })),
      );
      expect(first.outcome).toBe('written');
      expect(await scheduled()).toEqual([
        { id: first.eventId, status: 'scheduled', due_in_ms: expect.closeTo(700, 0), payload: { n: 1 } },
      ]);
      const again = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'later' }, { n: 2 }, { delayMs: 10 })),
      );
      expect(again).toEqual({ eventId: first.eventId, outcome: 'ignored' });
      // not due yet: drain leaves it to its time
      await t.relay.drain();
      expect(t.app.get(PayloadConsumer).seen).toEqual([]);
      await waitFor(
        async () => {
          await t.relay.drain();
          return t.app.get(PayloadConsumer).seen.length > 0;
        },
        { timeoutMs: 10_000, message: 'the keyed delayed event to be delivered' },
      );
      const [{ late_ms }] = await db.sql<{ late_ms: number }>(
        `select (extract(epoch from d.updated_at - e.deliver_at) * 1000)::float8 as late_ms
           from event_outbox e join outbox_deliveries d on d.event_id = e.id`,
      );
      expect(late_ms).toBeGreaterThanOrEqual(0);
      await t.relay.drain();
      expect(t.app.get(PayloadConsumer).seen).toEqual([{ id: first.eventId, data: { n: 1 } }]);
    });

    it('enqueueMany writes the delayed keyed events scheduled and the others pending, in one call', async () => {
      const at = new Date(Date.now() + 3_600_000);
      const outcomes = await inTx((r) =>
        t.outbox.enqueueMany(r, [
          keyed({ key: 'm1' }, { v: 1 }, { delayMs: 60_000 }),
          keyed({ key: 'm2' }, { v: 2 }),
          { tenantId: TENANT, eventName: NAME, payload: { v: 3 }, deliverAt: at },
          keyed({ key: 'm1', mode: 'replace' }, { v: 4 }),
        ]),
      );
      const rows = await scheduled();
      expect(rows.map(({ status, payload }) => ({ status, payload }))).toEqual([
        { status: 'scheduled', payload: { v: 4 } },
        { status: 'pending', payload: { v: 2 } },
        { status: 'scheduled', payload: { v: 3 } },
      ]);
      expect(rows[0]!.due_in_ms).toBeCloseTo(60_000, 0);
      expect(outcomes).toEqual([
        { eventId: rows[0]!.id, outcome: 'written' },
        { eventId: rows[1]!.id, outcome: 'written' },
        { eventId: rows[2]!.id, outcome: 'written' },
        { eventId: rows[0]!.id, outcome: 'replaced' },
      ]);
      const [{ deliver_at }] = await db.sql<{ deliver_at: Date }>(
        `select deliver_at from event_outbox where id = $1`,
        [rows[2]!.id],
      );
      expect(deliver_at).toEqual(at);
    });

    it('replaces the payload of a scheduled event, which keeps its time, and delivers the replaced payload once', async () => {
      const first = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'remind' }, { text: 'old' }, { delayMs: 3_600_000 })),
      );
      const second = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'remind', mode: 'replace' }, { text: 'new' }, { schemaVersion: 2 })),
      );
      expect(second).toEqual({ eventId: first.eventId, outcome: 'replaced' });
      expect(await scheduled()).toEqual([
        {
          id: first.eventId,
          status: 'scheduled',
          due_in_ms: expect.closeTo(3_600_000, 0),
          payload: { text: 'new' },
        },
      ]);
      // its time comes: promoted, delivered once, with the replaced payload
      await db.sql(`update event_outbox set deliver_at = now() - interval '1 second' where id = $1`, [
        first.eventId,
      ]);
      await waitFor(
        async () => {
          await t.relay.drain();
          return t.app.get(PayloadConsumer).seen.length > 0;
        },
        { timeoutMs: 10_000, message: 'the replaced scheduled event to be delivered' },
      );
      expect(t.app.get(PayloadConsumer).seen).toEqual([{ id: first.eventId, data: { text: 'new' } }]);
      // delivered: a later replace keeps it
      const late = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'remind', mode: 'replace' }, { text: 'late' })),
      );
      expect(late).toEqual({ eventId: first.eventId, outcome: 'kept' });
    });
  });

  describe("mode 'debounce'", () => {
    const row = () =>
      db.sql<{ status: string; due_in_ms: number; payload: unknown; schema_version: number }>(
        `select status, (extract(epoch from deliver_at - now()) * 1000)::float8 as due_in_ms, payload, schema_version
           from event_outbox`,
      );
    const debounce = (payload: unknown, more: Record<string, unknown>) =>
      inTx((r) => t.outbox.enqueue(r, keyed({ key: 'typing', mode: 'debounce' }, payload, more)));

    it('pushes the delivery time of a scheduled event and replaces its payload; delivers the last payload once', async () => {
      const first = await debounce({ text: 'h' }, { delayMs: 60_000 });
      expect(first.outcome).toBe('written');
      expect((await row())[0]).toMatchObject({ status: 'scheduled', payload: { text: 'h' } });
      expect((await row())[0]!.due_in_ms).toBeCloseTo(60_000, -3);

      const second = await debounce({ text: 'hi' }, { delayMs: 3_600_000, schemaVersion: 2 });
      expect(second).toEqual({ eventId: first.eventId, outcome: 'replaced' });
      const [pushed] = await row();
      expect(pushed).toMatchObject({ status: 'scheduled', payload: { text: 'hi' }, schema_version: 2 });
      expect(pushed!.due_in_ms).toBeCloseTo(3_600_000, -3);
      // to an instant, earlier than the current one too
      const at = new Date(Date.now() + 120_000);
      expect(await debounce({ text: 'hi!' }, { deliverAt: at })).toEqual({
        eventId: first.eventId,
        outcome: 'replaced',
      });
      expect(await db.sql(`select deliver_at from event_outbox`)).toEqual([{ deliver_at: at }]);

      // its time comes: delivered once, with the last payload; a debounce after that keeps it
      await db.sql(`update event_outbox set deliver_at = now() - interval '1 second'`);
      await waitFor(
        async () => {
          await t.relay.drain();
          return t.app.get(PayloadConsumer).seen.length > 0;
        },
        { timeoutMs: 10_000, message: 'the debounced event to be delivered' },
      );
      expect(await debounce({ text: 'late' }, { delayMs: 1000 })).toEqual({
        eventId: first.eventId,
        outcome: 'kept',
      });
      await t.relay.drain();
      expect(t.app.get(PayloadConsumer).seen).toEqual([{ id: first.eventId, data: { text: 'hi!' } }]);
      expect((await events()).length).toBe(1);
    });

    it('keeps an event that is pending (not delayed, or due already): there is no time to push', async () => {
      const first = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'typing' }, { text: 'now' })));
      expect(await debounce({ text: 'later' }, { delayMs: 60_000 })).toEqual({
        eventId: first.eventId,
        outcome: 'kept',
      });
      expect(await row()).toEqual([
        { status: 'pending', due_in_ms: null, payload: { text: 'now' }, schema_version: 1 },
      ]);
    });

    it('in one enqueueMany, a later debounce keeps a first event that is due at once (delayMs 0, a past deliverAt)', async () => {
      // as two calls would: the first is written pending (due now), so there is no time for the debounce to push
      for (const due of [{ delayMs: 0 }, { deliverAt: new Date(Date.now() - 60_000) }]) {
        await truncateOutbox(db);
        const outcomes = await inTx((r) =>
          t.outbox.enqueueMany(r, [
            keyed({ key: 'typing', mode: 'debounce' }, { v: 1 }, due),
            keyed({ key: 'typing', mode: 'debounce' }, { v: 2 }, { delayMs: 60_000 }),
            keyed({ key: 'typing', mode: 'replace' }, { v: 3 }),
          ]),
        );
        const [only] = await row();
        expect({ due, status: only!.status, payload: only!.payload }).toEqual({
          due,
          status: 'pending',
          payload: { v: 3 },
        });
        const [{ id }] = await events();
        expect(outcomes).toEqual([
          { eventId: id, outcome: 'written' },
          { eventId: id, outcome: 'kept' },
          { eventId: id, outcome: 'replaced' },
        ]);
      }
    });

    it('in one enqueueMany, folds a later debounce of a key into its scheduled first event (delayMs, a future deliverAt)', async () => {
      // a future deliverAt: the database's clock says it is to come (applied after the insert, as to a held key)
      for (const later of [{ delayMs: 60_000 }, { deliverAt: new Date(Date.now() + 60_000) }]) {
        await truncateOutbox(db);
        const outcomes = await inTx((r) =>
          t.outbox.enqueueMany(r, [
            keyed({ key: 'typing', mode: 'debounce' }, { v: 1 }, later),
            keyed({ key: 'typing', mode: 'debounce' }, { v: 2 }, { delayMs: 3_600_000 }),
          ]),
        );
        const [only] = await row();
        expect({ later, status: only!.status, payload: only!.payload }).toEqual({
          later,
          status: 'scheduled',
          payload: { v: 2 },
        });
        expect(only!.due_in_ms).toBeCloseTo(3_600_000, -3);
        const [{ id }] = await events();
        expect(outcomes).toEqual([
          { eventId: id, outcome: 'written' },
          { eventId: id, outcome: 'replaced' },
        ]);
      }
    });

    it('in one enqueueMany, a debounce then a replace of a scheduled event move its time and keep the last payload', async () => {
      const first = await debounce({ v: 0 }, { delayMs: 60_000 });
      const outcomes = await inTx((r) =>
        t.outbox.enqueueMany(r, [
          keyed({ key: 'typing', mode: 'debounce' }, { v: 1 }, { delayMs: 3_600_000 }),
          keyed({ key: 'typing', mode: 'replace' }, { v: 2 }, { schemaVersion: 2 }),
          keyed({ key: 'typing' }, { v: 3 }),
        ]),
      );
      expect(outcomes).toEqual([
        { eventId: first.eventId, outcome: 'replaced' },
        { eventId: first.eventId, outcome: 'replaced' },
        { eventId: first.eventId, outcome: 'ignored' },
      ]);
      const [only] = await row();
      expect(only).toMatchObject({ status: 'scheduled', payload: { v: 2 }, schema_version: 2 });
      expect(only!.due_in_ms).toBeCloseTo(3_600_000, -3);
    });

    it('in one enqueueMany, interleaved: key-less events, a held scheduled key, a held pending key and a free key, each repeated', async () => {
      const s = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 's', mode: 'debounce' }, { s: 0 }, { delayMs: 60_000 })),
      );
      const p = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'p' }, { p: 0 })));
      const outcomes = (await inTx((r) =>
        t.outbox.enqueueMany(r, [
          { tenantId: TENANT, eventName: NAME, payload: { u: 1 } },
          keyed({ key: 's', mode: 'debounce' }, { s: 1 }, { delayMs: 3_600_000 }),
          keyed({ key: 'p' }, { p: 1 }),
          keyed({ key: 'f' }, { f: 0 }, { delayMs: 60_000 }),
          { tenantId: TENANT, eventName: NAME, payload: { u: 2 } },
          keyed({ key: 'p', mode: 'debounce' }, { p: 2 }, { delayMs: 60_000 }),
          keyed({ key: 'f', mode: 'debounce' }, { f: 1 }, { delayMs: 7_200_000 }),
          keyed({ key: 's', mode: 'replace' }, { s: 2 }),
          keyed({ key: 'p', mode: 'replace' }, { p: 3 }),
          keyed({ key: 'f', mode: 'replace' }, { f: 2 }),
        ]),
      )) as { eventId: string; outcome: string }[];
      const f = outcomes[3]!.eventId;
      expect(outcomes.map((o) => o.outcome)).toEqual([
        'written',
        'replaced',
        'ignored',
        'written',
        'written',
        'kept',
        'replaced',
        'replaced',
        'replaced',
        'replaced',
      ]);
      expect(outcomes.map((o) => o.eventId)).toEqual([
        outcomes[0]!.eventId,
        s.eventId,
        p.eventId,
        f,
        outcomes[4]!.eventId,
        p.eventId,
        f,
        s.eventId,
        p.eventId,
        f,
      ]);
      const rows = new Map(
        (
          await db.sql<{ id: string; status: string; due_in_ms: number; payload: unknown }>(
            `select id, status, (extract(epoch from deliver_at - now()) * 1000)::float8 as due_in_ms, payload
               from event_outbox`,
          )
        ).map((e) => [e.id, e]),
      );
      expect(rows.size).toBe(5);
      expect(rows.get(s.eventId)).toMatchObject({ status: 'scheduled', payload: { s: 2 } });
      expect(rows.get(s.eventId)!.due_in_ms).toBeCloseTo(3_600_000, -3);
      expect(rows.get(p.eventId)).toMatchObject({ status: 'pending', payload: { p: 3 } });
      expect(rows.get(f)).toMatchObject({ status: 'scheduled', payload: { f: 2 } });
      expect(rows.get(f)!.due_in_ms).toBeCloseTo(7_200_000, -3);
      expect(rows.get(outcomes[0]!.eventId)).toMatchObject({ status: 'pending', payload: { u: 1 } });
      expect(rows.get(outcomes[4]!.eventId)).toMatchObject({ status: 'pending', payload: { u: 2 } });
    });

    it('in one enqueueMany, a replace then a debounce of a pending event: the replace applies, the debounce keeps', async () => {
      const first = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'typing' }, { v: 0 })));
      const outcomes = await inTx((r) =>
        t.outbox.enqueueMany(r, [
          keyed({ key: 'typing', mode: 'replace' }, { v: 1 }),
          keyed({ key: 'typing', mode: 'debounce' }, { v: 2 }, { delayMs: 60_000 }),
        ]),
      );
      expect(outcomes).toEqual([
        { eventId: first.eventId, outcome: 'replaced' },
        { eventId: first.eventId, outcome: 'kept' },
      ]);
      expect(await row()).toEqual([
        { status: 'pending', due_in_ms: null, payload: { v: 1 }, schema_version: 1 },
      ]);
    });
  });

  describe('two transactions enqueuing one key at once', () => {
    /** Opens a transaction on a connection of its own, and says its backend pid. */
    const open = async (
      isolation?: 'READ COMMITTED' | 'REPEATABLE READ',
    ): Promise<{ runner: QueryRunner; pid: number }> => {
      const runner = t.dataSource.createQueryRunner();
      await runner.connect();
      await runner.startTransaction(isolation);
      const [{ pid }] = (await runner.query('select pg_backend_pid() as pid')) as { pid: number }[];
      return { runner, pid };
    };
    const waitingOnLock = async (pid: number): Promise<boolean> => {
      const [row] = await db.sql<{ wait_event_type: string | null }>(
        'select wait_event_type from pg_stat_activity where pid = $1',
        [pid],
      );
      return row?.wait_event_type === 'Lock';
    };
    const finish = async (runner: QueryRunner, commit: boolean) => {
      if (commit) await runner.commitTransaction();
      else await runner.rollbackTransaction();
      await runner.release();
    };

    it('commit exactly one event: the second waits for the first to commit, then returns its id', async () => {
      const a = await open();
      const b = await open();
      const first = await t.outbox.enqueue(a.runner, keyed({ key: 'pay-1' }, { by: 'a' }));
      const second = t.outbox.enqueue(b.runner, keyed({ key: 'pay-1' }, { by: 'b' }));
      await waitFor(() => waitingOnLock(b.pid), { message: 'the second transaction to wait on the key' });
      await finish(a.runner, true);
      expect(await within(5_000, second, 'the second enqueue')).toEqual({
        eventId: first.eventId,
        outcome: 'ignored',
      });
      await finish(b.runner, true);
      expect((await events()).map((e) => e.payload)).toEqual([{ by: 'a' }]);
    });

    it('commit the second one when the first rolls back', async () => {
      const a = await open();
      const b = await open();
      await t.outbox.enqueue(a.runner, keyed({ key: 'pay-2' }, { by: 'a' }));
      const second = t.outbox.enqueue(b.runner, keyed({ key: 'pay-2' }, { by: 'b' }));
      await waitFor(() => waitingOnLock(b.pid), { message: 'the second transaction to wait on the key' });
      await finish(a.runner, false);
      const outcome = await within(5_000, second, 'the second enqueue');
      expect(outcome.outcome).toBe('written');
      await finish(b.runner, true);
      expect(await events()).toEqual([
        {
          id: outcome.eventId,
          payload: { by: 'b' },
          dedupe_key: 'pay-2',
          tenant_id: TENANT,
          event_name: NAME,
        },
      ]);
      expect(await keys()).toEqual([{ dedupe_key: 'pay-2', event_id: outcome.eventId }]);
    });

    it.each([
      ['rolls back', false],
      ['commits', true],
    ] as const)(
      'one enqueueMany of a future deliverAt then a debounce of its key, waiting on a key another transaction holds, which %s: as if the calls came one after the other',
      async (_, commit) => {
        const a = await open();
        const b = await open();
        try {
          await t.outbox.enqueue(
            a.runner,
            keyed({ key: 'deb', mode: 'debounce' }, { v: 0 }, { delayMs: 60_000 }),
          );
          const second = t.outbox.enqueueMany(b.runner, [
            keyed({ key: 'deb', mode: 'debounce' }, { v: 1 }, { deliverAt: new Date(Date.now() + 60_000) }),
            keyed({ key: 'deb', mode: 'debounce' }, { v: 2 }, { delayMs: 3_600_000 }),
          ]);
          await waitFor(() => waitingOnLock(b.pid), { message: 'the second transaction to wait on the key' });
          await finish(a.runner, commit);
          const outcomes = await within(5_000, second, 'the second enqueueMany');
          await finish(b.runner, true);
          const rows = await db.sql<{ id: string; status: string; due_in_ms: number; payload: unknown }>(
            `select id, status, (extract(epoch from deliver_at - now()) * 1000)::float8 as due_in_ms, payload
               from event_outbox`,
          );
          expect(rows).toEqual([expect.objectContaining({ status: 'scheduled', payload: { v: 2 } })]);
          expect(rows[0]!.due_in_ms).toBeCloseTo(3_600_000, -4);
          expect(outcomes).toEqual([
            { eventId: rows[0]!.id, outcome: commit ? 'replaced' : 'written' },
            { eventId: rows[0]!.id, outcome: 'replaced' },
          ]);
          expect(await keys()).toEqual([{ dedupe_key: 'deb', event_id: rows[0]!.id }]);
        } finally {
          for (const { runner } of [a, b]) {
            if (runner.isTransactionActive) await runner.rollbackTransaction();
            if (!runner.isReleased) await runner.release();
          }
        }
      },
    );

    it.each(['READ COMMITTED', 'REPEATABLE READ'] as const)(
      'of a key held already: neither writes nor waits, both get the holder, under %s',
      async (isolation) => {
        const held = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'held' }, { by: 'first' })));
        const version = () => db.sql<{ xmin: string }>('select xmin::text from outbox_dedupe_keys');
        const before = await version();
        const a = await open(isolation);
        const b = await open(isolation);
        try {
          expect(
            await within(5_000, t.outbox.enqueue(a.runner, keyed({ key: 'held' }, { by: 'a' })), 'a'),
          ).toEqual({
            eventId: held.eventId,
            outcome: 'ignored',
          });
          // b does not wait for a (which holds no lock on the key): it returns while a is still open
          const second = t.outbox.enqueue(b.runner, keyed({ key: 'held', mode: 'replace' }, { by: 'b' }));
          expect(await within(5_000, second, 'b, while a is open')).toEqual({
            eventId: held.eventId,
            // 'replace' keeps the payload outside READ COMMITTED (docs/flow-control.md)
            outcome: isolation === 'READ COMMITTED' ? 'replaced' : 'kept',
          });
          await a.runner.commitTransaction();
          await b.runner.commitTransaction();
        } finally {
          for (const { runner } of [a, b]) {
            if (runner.isTransactionActive) await runner.rollbackTransaction();
            await runner.release();
          }
        }
        // the key's row was not written again (same version), and one event exists
        expect(await version()).toEqual(before);
        expect((await events()).map((e) => e.id)).toEqual([held.eventId]);
      },
    );

    it.each([
      ['commits', 'one by one', true],
      ['rolls back', 'one by one', false],
      ['commits', 'many at once', true],
      ['rolls back', 'many at once', false],
    ] as const)(
      'of an expired key: the second waits for the first takeover and, when it %s, gets its id or takes the key (%s)',
      async (_, how, commit) => {
        const old = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'exp' }, { by: 'old' })));
        await db.sql(`update outbox_dedupe_keys set expires_at = now() - interval '1 second'`);
        const a = await open();
        const b = await open();
        const enqueue = async (runner: QueryRunner, by: string) =>
          how === 'one by one'
            ? t.outbox.enqueue(runner, keyed({ key: 'exp' }, { by }))
            : (
                await t.outbox.enqueueMany(runner, [
                  keyed({ key: 'exp' }, { by }),
                  keyed({ key: `other-${by}` }),
                ])
              )[0]!;
        const first = await enqueue(a.runner, 'a');
        expect(first.outcome).toBe('written');
        const second = enqueue(b.runner, 'b');
        await waitFor(() => waitingOnLock(b.pid), { message: 'the second transaction to wait on the key' });
        await finish(a.runner, commit);
        const outcome = await within(5_000, second, 'the second enqueue');
        await finish(b.runner, true);
        const holder = commit ? first.eventId : outcome.eventId;
        expect(outcome).toEqual({ eventId: holder, outcome: commit ? 'ignored' : 'written' });
        expect(await keys()).toEqual(expect.arrayContaining([{ dedupe_key: 'exp', event_id: holder }]));
        expect((await events()).filter((e) => e.dedupe_key === 'exp').map((e) => e.payload)).toEqual([
          { by: 'old' },
          { by: commit ? 'a' : 'b' },
        ]);
        expect(old.outcome).toBe('written');
      },
    );

    it('under REPEATABLE READ, the second fails with 40001 when the first commits a free key after its snapshot', async () => {
      const a = await open();
      const b = await open('REPEATABLE READ'); // its snapshot is taken (open's first statement)
      await t.outbox.enqueue(a.runner, keyed({ key: 'race' }, { by: 'a' }));
      const second = t.outbox.enqueue(b.runner, keyed({ key: 'race' }, { by: 'b' }));
      const failed = second.catch((error: { code?: string }) => error.code);
      await waitFor(() => waitingOnLock(b.pid), { message: 'the second transaction to wait on the key' });
      await finish(a.runner, true);
      expect(await within(5_000, failed, 'the second enqueue')).toBe('40001');
      await finish(b.runner, false);
      expect((await events()).map((e) => e.payload)).toEqual([{ by: 'a' }]);
    });

    it('never deadlock, with many keys in opposite orders, and commit one event per key', async () => {
      const names = Array.from({ length: 50 }, (_, i) => `k${String(i).padStart(2, '0')}`);
      const forward = names.map((key) => keyed({ key }, { key }));
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          inTx((r) => t.outbox.enqueueMany(r, i % 2 ? forward : [...forward].reverse())),
        ),
      );
      const rows = await events();
      expect(rows.map((e) => e.dedupe_key).sort()).toEqual(names);
      const idOf = new Map(rows.map((e) => [e.dedupe_key, e.id]));
      for (const [i, outcomes] of results.entries()) {
        const order = i % 2 ? forward : [...forward].reverse();
        expect(outcomes.map((o) => o.eventId)).toEqual(order.map((e) => idOf.get(e.dedupe.key)));
      }
      expect(results.flat().filter((o) => o.outcome === 'written')).toHaveLength(names.length);
    });
  });

  it('enqueueMany: keyed and key-less events together, a duplicate inside the call counting as a second enqueue', async () => {
    const before = await inTx((r) => t.outbox.enqueue(r, keyed({ key: 'taken' }, { v: 0 })));
    const outcomes = await inTx((r) =>
      t.outbox.enqueueMany(r, [
        keyed({ key: 'x' }, { v: 1 }),
        { tenantId: TENANT, eventName: NAME, payload: { v: 'no key' } },
        keyed({ key: 'x' }, { v: 2 }),
        keyed({ key: 'y' }, { v: 3 }),
        keyed({ key: 'y', mode: 'replace' }, { v: 4 }),
        keyed({ key: 'taken' }, { v: 5 }),
      ]),
    );
    const rows = await events();
    expect(rows.map((e) => e.payload)).toEqual([{ v: 0 }, { v: 1 }, { v: 'no key' }, { v: 4 }]);
    const [, x, none, y] = rows.map((e) => e.id);
    expect(outcomes).toEqual([
      { eventId: x, outcome: 'written' },
      { eventId: none, outcome: 'written' },
      { eventId: x, outcome: 'ignored' },
      { eventId: y, outcome: 'written' },
      { eventId: y, outcome: 'replaced' },
      { eventId: before.eventId, outcome: 'ignored' },
    ]);
    // without any key, enqueueMany still returns ids
    const ids = await inTx((r) =>
      t.outbox.enqueueMany(r, [{ tenantId: TENANT, eventName: NAME, payload: {} }]),
    );
    expect(ids).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/)]);
  });

  it('keeps keys apart per tenant and per event name', async () => {
    const outcomes = await inTx((r) =>
      t.outbox.enqueueMany(r, [
        keyed({ key: 'same' }),
        keyed({ key: 'same' }, {}, { tenantId: TENANTS[1] }),
        keyed({ key: 'same' }, {}, { eventName: OTHER_NAME }),
      ]),
    );
    expect(outcomes.map((o) => o.outcome)).toEqual(['written', 'written', 'written']);
    expect(new Set(outcomes.map((o) => o.eventId)).size).toBe(3);
    expect((await keys()).length).toBe(3);
  });

  describe('refuses a bad dedupe before writing anything, naming the field', () => {
    const cases: [string, unknown, string][] = [
      ['a string', 'order-1', 'events[1].dedupe'],
      ['no key', {}, 'events[1].dedupe.key'],
      ['an empty key', { key: '' }, 'events[1].dedupe.key'],
      ['a key of 201 characters', { key: 'k'.repeat(201) }, 'events[1].dedupe.key'],
      ['a key with a control character', { key: 'a\nb' }, 'events[1].dedupe.key'],
      // a lone surrogate would reach PostgreSQL as U+FFFD: 'a\uD800' and 'a\uDC00' would be one key
      ['a key with a lone surrogate', { key: 'a\uD800' }, 'events[1].dedupe.key'],
      ['an unknown mode', { key: 'k', mode: 'throttle' }, 'events[1].dedupe.mode'],
      ["'debounce' on an event without a delay", { key: 'k', mode: 'debounce' }, 'events[1].dedupe.mode'],
      ['a zero window', { key: 'k', windowMs: 0 }, 'events[1].dedupe.windowMs'],
      ['a fractional window', { key: 'k', windowMs: 1.5 }, 'events[1].dedupe.windowMs'],
      ['a window over 366 days', { key: 'k', windowMs: 367 * 86_400_000 }, 'events[1].dedupe.windowMs'],
    ];
    it.each(cases)('%s', async (_, dedupe, field) => {
      const call = inTx((r) => t.outbox.enqueueMany(r, [keyed({ key: 'good' }), keyed(dedupe as Dedupe)]));
      await expect(call).rejects.toThrow(OutboxValidationError);
      await expect(call).rejects.toMatchObject({ field });
      expect(await events()).toEqual([]);
      expect(await keys()).toEqual([]);
    });
  });

  it('retention deletes expired keys and keeps live ones', async () => {
    await inTx((r) =>
      t.outbox.enqueueMany(r, [keyed({ key: 'old-1' }), keyed({ key: 'old-2' }), keyed({ key: 'live' })]),
    );
    await db.sql(
      `update outbox_dedupe_keys set expires_at = now() - interval '1 second' where dedupe_key like 'old-%'`,
    );
    const result = await t.app.get(OutboxRetention).purgeNow();
    expect(result.deletedKeys).toBe(2);
    expect((await keys()).map((k) => k.dedupe_key)).toEqual(['live']);
  });

  describe('under row-level security, as the app role', () => {
    let appRole: TestRole;
    let app: TestApp;
    beforeAll(async () => {
      appRole = await createLoginRole(db, 'outbox_app');
      app = await buildApp({ url: appRole.url, admin: false });
    });
    afterAll(async () => {
      await app?.close();
      await appRole?.drop();
    });

    const asTenant = <T>(tenant: string, work: (r: QueryRunner) => Promise<T>): Promise<T> =>
      app.dataSource.transaction(async (manager) => {
        await manager.query('select set_config($1, $2, true)', ['app.current_tenant_id', tenant]);
        return work(manager.queryRunner!);
      });

    it('writes, ignores and replaces within its tenant', async () => {
      const first = await asTenant(TENANT, (r) => app.outbox.enqueue(r, keyed({ key: 'rls' }, { v: 1 })));
      const again = await asTenant(TENANT, (r) =>
        app.outbox.enqueue(r, keyed({ key: 'rls', mode: 'replace' }, { v: 2 })),
      );
      expect(again).toEqual({ eventId: first.eventId, outcome: 'replaced' });
      const other = await asTenant(TENANTS[1], (r) =>
        app.outbox.enqueue(r, keyed({ key: 'rls' }, { v: 3 }, { tenantId: TENANTS[1] })),
      );
      expect(other.outcome).toBe('written');
      expect((await events()).map((e) => e.payload)).toEqual([{ v: 2 }, { v: 3 }]);
    });

    it("cannot replace another tenant's payload, nor read the events, by calling the function itself", async () => {
      const theirs = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'theirs' }, { v: 'theirs' }, { tenantId: TENANTS[1] })),
      );
      const [row] = await asTenant(TENANT, (r) =>
        r.query('select outbox_dedupe_replace($1, $2::jsonb, 1) as replaced', [
          theirs.eventId,
          '{"v":"mine"}',
        ]),
      );
      expect(row).toEqual({ replaced: false });
      await expect(asTenant(TENANT, (r) => r.query('select count(*) from event_outbox'))).rejects.toThrow(
        /permission denied/,
      );
      expect((await events()).map((e) => e.payload)).toEqual([{ v: 'theirs' }]);
    });

    it("cannot replace another tenant's payload after SET ROLE from a superuser login either", async () => {
      const theirs = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'theirs' }, { v: 'theirs' }, { tenantId: TENANTS[1] })),
      );
      // the superuser login of `t`, acting as the app role: the policies apply to it, so must the function
      const [row] = await inTx(async (r) => {
        await r.query('set local role outbox_app');
        await r.query('select set_config($1, $2, true)', ['app.current_tenant_id', TENANT]);
        return r.query('select outbox_dedupe_replace($1, $2::jsonb, 1) as replaced', [
          theirs.eventId,
          '{"v":"mine"}',
        ]);
      });
      expect(row).toEqual({ replaced: false });
      expect((await events()).map((e) => e.payload)).toEqual([{ v: 'theirs' }]);
    });

    it("cannot read nor take another tenant's key by calling outbox_dedupe_take itself", async () => {
      const theirs = await inTx((r) =>
        t.outbox.enqueue(r, keyed({ key: 'theirs' }, { v: 'theirs' }, { tenantId: TENANTS[1] })),
      );
      const take = (windowMs: number) =>
        asTenant(TENANT, (r) =>
          r.query(
            `select outbox_dedupe_take($1, $2, 'theirs', '00000000-0000-4000-8000-000000000001', $3) as holder`,
            [TENANTS[1], NAME, windowMs],
          ),
        );
      await expect(take(60_000)).rejects.toThrow(/row-level security/);
      // an expired key of theirs is not taken over either
      await db.sql(`update outbox_dedupe_keys set expires_at = now() - interval '1 second'`);
      await expect(take(60_000)).rejects.toThrow(/row-level security/);
      expect(await keys()).toEqual([{ dedupe_key: 'theirs', event_id: theirs.eventId }]);
    });

    it('is refused for another tenant than the transaction names, writing nothing', async () => {
      await expect(
        asTenant(TENANT, (r) => app.outbox.enqueue(r, keyed({ key: 'x' }, {}, { tenantId: TENANTS[1] }))),
      ).rejects.toThrow(/row-level security refused/);
      expect(await keys()).toEqual([]);
    });
  });
});
