import { Injectable, type Type } from '@nestjs/common';
import {
  OnOutboxEvent,
  OutboxRetention,
  OutboxService,
  OutboxValidationError,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { OperatorGuard, tenantsOf } from '../support/board-operators';
import { buildApp, type TestApp } from '../support/build-app';
import { buildHttpApp } from '../support/http-app';
import { createLoginRole, type TestRole } from '../support/test-roles';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE_SQL,
  effectIds,
  enqueueIn,
  enqueueManyIn,
  recordEffect,
  TENANT,
  TENANTS,
  eventRow,
  truncateOutbox,
  type TestEvent,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';
import {
  insertScheduledEvent,
  insertScheduledEvents,
  outboxNames,
  type EventRow,
} from '../../libs/outbox/src/store/sql';

/** Every consumer writes an effect row in its batch transaction: its `created_at` is when the batch began (the database's clock). */
@Injectable()
class DelayedConsumers {
  constructor(private readonly outbox: OutboxService) {}

  @OnOutboxEvent('test.dl.*', { consumer: 'plain' })
  plain(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  /** Enqueues a delayed follow-up in its batch transaction. */
  @OnOutboxEvent('test.chain.v1', { consumer: 'chain' })
  async chain(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await this.outbox.enqueue(context.manager, {
      tenantId: event.tenantId,
      eventName: 'test.dl.followup.v1',
      payload: {},
      delayMs: 300,
    });
  }

  @OnOutboxEvent('test.dl.*', { consumer: 'ordered', ordered: true })
  ordered(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

let db: TestDatabase;
const apps: TestApp[] = [];
/** Login roles made by a test, dropped after the database (which holds their grants). */
const roles: TestRole[] = [];

/** An app; with `relay`, its relay runs on its own, polling only once a minute (so the timer, not a poll, delivers). */
async function start(options: { relay?: boolean } = {}): Promise<TestApp> {
  const app = await buildApp({
    url: db.url,
    providers: [DelayedConsumers],
    outbox: options.relay ? { relay: { enabled: true, pollIntervalMs: 60_000 } } : undefined,
  });
  apps.push(app);
  await app.relay.heartbeat();
  return app;
}

async function stopAll(): Promise<void> {
  while (apps.length > 0) await apps.pop()!.close();
}

const event = (extra: Partial<TestEvent> = {}): TestEvent => ({ eventName: 'test.dl.a.v1', ...extra });

/** Each event's status and deliver_at, and its handler starts (effect rows) by `consumer`, by the database's clock. */
async function deliveries(
  consumer: string,
): Promise<{ id: string; status: string; deliver_at: Date | null; started: Date[]; late_ms: number[] }[]> {
  return db.sql(
    `select e.id, e.status, e.deliver_at,
            coalesce(array_agg(f.created_at order by f.id) filter (where f.id is not null), '{}') as started,
            coalesce(array_agg(extract(epoch from f.created_at - e.deliver_at) * 1000 order by f.id)
                       filter (where f.id is not null), '{}')::float8[] as late_ms
       from event_outbox e left join test_effects f on f.event_id = e.id and f.consumer = $1
      group by e.id order by e.created_at, e.id`,
    [consumer],
  );
}

async function dbNow(): Promise<Date> {
  const [row] = await db.sql<{ now: Date }>('select clock_timestamp() as now');
  return row!.now;
}

/** Lateness (handler start − deliver_at) percentiles, printed for the ADR. */
function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL]);
});
afterAll(async () => {
  await stopAll();
  await db?.drop();
  for (const role of roles) await role.drop();
});
beforeEach(async () => {
  await truncateOutbox(db, 'test_effects');
});
afterEach(stopAll);

describe('an event enqueued with delayMs or deliverAt', () => {
  it('is not delivered before its time by the database clock, and is delivered then by the timer, with no other event and no poll', async () => {
    const t = await start({ relay: true });
    const id = await enqueueIn(t, event({ delayMs: 1200 }));
    const [row] = await db.sql<{ status: string; due_in_ms: number }>(
      `select status, (extract(epoch from deliver_at - created_at) * 1000)::float8 as due_in_ms from event_outbox where id = $1`,
      [id],
    );
    expect(row).toEqual({ status: 'scheduled', due_in_ms: expect.closeTo(1200, 0) });
    // a relay driven by hand meanwhile finds nothing to deliver
    expect((await t.relay.runOnce()).eventsClaimed).toBe(0);
    expect(await effectIds(db)).toEqual([]);

    const [done] = await waitFor(
      async () => {
        const rows = await deliveries('plain');
        return rows[0]!.started.length > 0 ? rows : null;
      },
      { timeoutMs: 10_000, message: 'the delayed event to be delivered' },
    );
    expect(done!.started).toHaveLength(1);
    expect(done!.late_ms[0]).toBeGreaterThanOrEqual(0);
    // the timer, not the once-a-minute poll
    expect(done!.late_ms[0]).toBeLessThan(1000);
  });

  it('with deliverAt keeps the instant given and is delivered at it, not before', async () => {
    const t = await start({ relay: true });
    const at = new Date((await dbNow()).getTime() + 800);
    const id = await enqueueIn(t, event({ deliverAt: at }));
    expect((await db.sql(`select deliver_at from event_outbox where id = $1`, [id]))[0]).toEqual({
      deliver_at: at,
    });
    await waitFor(async () => (await effectIds(db, 'plain')).length === 1, { timeoutMs: 10_000 });
    const [done] = await deliveries('plain');
    expect(done!.late_ms[0]).toBeGreaterThanOrEqual(0);
    expect(done!.late_ms[0]).toBeLessThan(1000);
  });

  it('with a deliverAt already past, or delayMs 0, is delivered at once', async () => {
    const t = await start();
    const ids = await enqueueManyIn(t, [
      event({ deliverAt: new Date(Date.now() - 60_000) }),
      event({ delayMs: 0 }),
    ]);
    expect((await db.sql(`select status from event_outbox`)).map((r) => r.status)).toEqual([
      'pending',
      'pending',
    ]);
    await t.relay.drain();
    expect(await effectIds(db, 'plain')).toEqual(ids);
  });

  it('in enqueueMany beside events not delayed: those go at once, the delayed one at its time', async () => {
    const t = await start();
    const [first, delayed, last] = await enqueueManyIn(t, [
      event({ payload: { i: 0 } }),
      event({ payload: { i: 1 }, delayMs: 700 }),
      event({ payload: { i: 2 } }),
    ]);
    await t.relay.drain();
    expect(await effectIds(db, 'plain')).toEqual([first, last]);
    await waitFor(async () => (await db.sql(`select 1 from event_outbox where deliver_at <= now()`)).length, {
      timeoutMs: 5_000,
      message: 'the database clock to pass deliver_at',
    });
    await t.relay.drain();
    expect(await effectIds(db, 'plain')).toEqual([first, last, delayed]);
    const rows = await deliveries('plain');
    expect(rows.find((r) => r.id === delayed)!.late_ms[0]).toBeGreaterThanOrEqual(0);
  });
});

describe('the delayed inserts', () => {
  it('write the trace context when there is one, one event or many', async () => {
    const row = (i: number, extra: Partial<EventRow>): EventRow => eventRow(i, 'test.dl.a.v1', extra);
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const one = insertScheduledEvent(outboxNames(), row(1, { delayMs: 60_000, traceparent }));
    await db.sql(one.text, one.values as unknown[]);
    const many = insertScheduledEvents(outboxNames(), [
      row(2, { traceparent }),
      row(3, { deliverAt: new Date(Date.now() + 60_000), traceparent }),
    ]);
    await db.sql(many.text, many.values as unknown[]);
    expect(await db.sql(`select status, traceparent from event_outbox order by id`)).toEqual([
      { status: 'scheduled', traceparent },
      { status: 'pending', traceparent },
      { status: 'scheduled', traceparent },
    ]);
  });
});

describe('a delayed event enqueued by a handler', () => {
  it('is delivered at its time by the relay that ran the handler, without waiting for a poll', async () => {
    const t = await start({ relay: true });
    await enqueueIn(t, { eventName: 'test.chain.v1' });
    const [followUp] = await waitFor(
      async () => {
        const rows = await db.sql<{ id: string; status: string }>(
          `select id, status from event_outbox where event_name = 'test.dl.followup.v1'`,
        );
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 5_000, message: 'the handler to enqueue its follow-up' },
    );
    await waitFor(async () => (await effectIds(db, 'plain')).includes(followUp!.id), {
      timeoutMs: 5_000,
      message: 'the follow-up delivered (the poll is once a minute)',
    });
    const rows = await deliveries('plain');
    expect(rows.find((r) => r.id === followUp!.id)!.late_ms[0]).toBeGreaterThanOrEqual(0);
  });
});

describe('bad delays', () => {
  it.each([
    [{ delayMs: 10, deliverAt: new Date() }, 'event.delayMs', /both given.*give one of them/],
    [{ deliverAt: new Date('nope') }, 'event.deliverAt', /must be a valid Date/],
    [{ deliverAt: '2030-01-01' }, 'event.deliverAt', /must be a valid Date, got "2030-01-01"/],
    [{ delayMs: -1 }, 'event.delayMs', /0 or more, got -1/],
    [{ delayMs: Number.NaN }, 'event.delayMs', /got NaN/],
    [{ delayMs: '10' }, 'event.delayMs', /got "10"/],
    // past what PostgreSQL's timestamptz holds (294276 AD) once added to now(): refused here, not by the insert
    [{ delayMs: 1e16 }, 'event.delayMs', /at most 8640000000000000.*got 10000000000000000/],
    [{ delayMs: Number.MAX_VALUE }, 'event.delayMs', /at most 8640000000000000/],
    // before PostgreSQL's earliest timestamptz (4713 BC)
    [{ deliverAt: new Date(-8.64e15) }, 'event.deliverAt', /4713 BC/],
  ])('%p is refused naming %s, and nothing is written', async (extra, field, message) => {
    const t = await start();
    const error = await enqueueIn(t, event(extra as Partial<TestEvent>)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxValidationError);
    expect(error).toMatchObject({ field, message: expect.stringMatching(message) });
    expect(await db.sql(`select id from event_outbox`)).toEqual([]);
  });

  it('names the event of enqueueMany, and writes none of the call', async () => {
    const t = await start();
    const error = await enqueueManyIn(t, [event(), event({ delayMs: -5 })]).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'OutboxValidationError', field: 'events[1].delayMs' });
    expect(await db.sql(`select id from event_outbox`)).toEqual([]);
  });
});

describe('an ordered consumer', () => {
  it('gets a delayed event in its aggregate when it becomes due: after those enqueued before, before those enqueued after, and the later ones are not held back meanwhile', async () => {
    const t = await start({ relay: true });
    const aggregate = { aggregateType: 'order', aggregateId: 'o-1' };
    const delayed = await enqueueIn(t, event({ ...aggregate, delayMs: 800 }));
    const before = await enqueueIn(t, event(aggregate));
    await waitFor(async () => (await effectIds(db, 'ordered')).includes(before), { timeoutMs: 10_000 });
    expect(await effectIds(db, 'ordered')).toEqual([before]);
    await waitFor(async () => (await effectIds(db, 'ordered')).includes(delayed), { timeoutMs: 10_000 });
    const after = await enqueueIn(t, event(aggregate));
    await waitFor(async () => (await effectIds(db, 'ordered')).length === 3, { timeoutMs: 10_000 });
    expect(await effectIds(db, 'ordered')).toEqual([before, delayed, after]);
    // its place is its promotion: a seq after the event enqueued after it was (sequence order)
    const seqs = await db.sql<{ id: string }>(`select id from event_outbox order by seq`);
    expect(seqs.map((r) => r.id)).toEqual([before, delayed, after]);
  });
});

describe('around a delayed event', () => {
  it('retention never purges one not yet due, however old', async () => {
    const t = await start();
    const scheduled = await enqueueIn(t, event({ delayMs: 86_400_000 }));
    const settled = await enqueueIn(t, event());
    await t.relay.drain();
    await db.sql(
      `update event_outbox set created_at = now() - interval '400 days', published_at = now() - interval '400 days' where id = $1`,
      [settled],
    );
    await db.sql(`update event_outbox set created_at = now() - interval '400 days' where id = $1`, [
      scheduled,
    ]);
    expect(await t.app.get(OutboxRetention).purgeNow()).toMatchObject({ deletedEvents: 1 });
    expect(await db.sql(`select id, status from event_outbox`)).toEqual([
      { id: scheduled, status: 'scheduled' },
    ]);
  });

  it('stats count scheduled events and say when the next is due', async () => {
    const t = await start();
    const at = new Date((await dbNow()).getTime() + 3_600_000);
    await enqueueManyIn(t, [event({ deliverAt: at }), event({ delayMs: 7_200_000 }), event()]);
    const stats = await t.app.get(OutboxAdminService).stats(TENANT);
    expect(stats.events).toMatchObject({ scheduled: 2, pending: 1 });
    expect(stats.nextDeliveryAt).toEqual(at);
  });
});

describe('a delayed event promoted and waiting', () => {
  it('counts as waiting from its deliver_at, not from its insert, in stats and the health check', async () => {
    const t = await start();
    const id = await enqueueIn(t, event({ delayMs: 3_600_000 }));
    await db.sql(
      `update event_outbox set created_at = now() - interval '1 day', deliver_at = now() - interval '5 seconds' where id = $1`,
      [id],
    );
    expect(await db.sql(`select promoted from outbox_promote_scheduled(10)`)).toEqual([{ promoted: 1 }]);
    expect(await db.sql(`select status from event_outbox where id = $1`, [id])).toEqual([
      { status: 'pending' },
    ]);
    const { oldestPendingAgeSeconds } = await t.app.get(OutboxAdminService).stats(TENANT);
    expect(oldestPendingAgeSeconds).toBeGreaterThanOrEqual(5);
    expect(oldestPendingAgeSeconds).toBeLessThan(60);
    const [health] = await db.sql<{ seconds: number }>(
      `select outbox_oldest_pending_age(interval '1 hour') as seconds`,
    );
    expect(health!.seconds).toBeGreaterThanOrEqual(5);
    expect(health!.seconds).toBeLessThan(60);
  });
});

describe('a delayed event due but not promoted (no relay ran since it fell due)', () => {
  it('counts as waiting from its deliver_at in stats and the health check (outbox_oldest_pending_age, the metrics gauge): it is work not done', async () => {
    const t = await start();
    const id = await enqueueIn(t, event({ delayMs: 3_600_000 }));
    // every relay down for ten minutes past its time: nobody promoted it
    await db.sql(`update event_outbox set deliver_at = now() - interval '10 minutes' where id = $1`, [id]);
    expect(await db.sql(`select status from event_outbox where id = $1`, [id])).toEqual([
      { status: 'scheduled' },
    ]);
    const { oldestPendingAgeSeconds } = await t.app.get(OutboxAdminService).stats(TENANT);
    expect(oldestPendingAgeSeconds).toBeGreaterThanOrEqual(600);
    const [health] = await db.sql<{ seconds: number }>(
      `select outbox_oldest_pending_age(interval '1 hour') as seconds`,
    );
    expect(health!.seconds).toBeGreaterThanOrEqual(600);
  });

  it('not yet due, counts for nothing', async () => {
    const t = await start();
    await enqueueIn(t, event({ delayMs: 3_600_000 }));
    const { oldestPendingAgeSeconds } = await t.app.get(OutboxAdminService).stats(TENANT);
    expect(oldestPendingAgeSeconds ?? 0).toBe(0);
    const [health] = await db.sql<{ seconds: number }>(
      `select outbox_oldest_pending_age(interval '1 hour') as seconds`,
    );
    expect(health!.seconds).toBe(0);
  });
});

describe('several relay instances', () => {
  it('deliver each delayed event exactly once, on time, though the app that enqueued them runs no relay', async () => {
    const enqueuer = await start();
    await start({ relay: true });
    await start({ relay: true });
    const count = 40;
    const ids = await enqueueManyIn(
      enqueuer,
      Array.from({ length: count }, (_, i) => event({ payload: { i }, delayMs: 300 + 25 * i })),
    );
    await waitFor(async () => (await effectIds(db, 'plain')).length >= count, {
      timeoutMs: 15_000,
      message: `${count} delayed events delivered`,
    });
    const rows = await deliveries('plain');
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(rows.every((r) => r.started.length === 1)).toBe(true);
    const late = rows.map((r) => r.late_ms[0]!);
    expect(Math.min(...late)).toBeGreaterThanOrEqual(0);
    const p50 = percentile(late, 50);
    const p99 = percentile(late, 99);
    // the relays' poll is once a minute: the timers woke them
    expect(p99).toBeLessThan(1000);
    // a last look a while later: nothing delivered twice
    await enqueueIn(enqueuer, event({ delayMs: 200 }));
    await waitFor(async () => (await effectIds(db, 'plain')).length === count + 1, { timeoutMs: 10_000 });
    expect(new Set(await effectIds(db, 'plain')).size).toBe(count + 1);

    // beside it, in the same run: events without a delay, one commit each at the same pace (enqueue → batch start)
    for (let i = 0; i < count; i++) {
      await enqueueIn(enqueuer, event({ payload: { undelayed: i } }));
      await new Promise((resolve) => setTimeout(resolve, 25)); // pacing only: nothing is decided by it
    }
    await waitFor(async () => (await effectIds(db, 'plain')).length === 2 * count + 1, { timeoutMs: 10_000 });
    const undelayed = (
      await db.sql<{ ms: number }>(
        `select (extract(epoch from f.created_at - e.created_at) * 1000)::float8 as ms
           from event_outbox e join test_effects f on f.event_id = e.id and f.consumer = 'plain'
          where e.deliver_at is null`,
      )
    ).map((r) => r.ms);
    process.stdout.write(
      `delayed-events lateness (handler batch start − deliver_at, 2 relays, ${count} events): p50 ${p50.toFixed(1)} ms, ` +
        `p99 ${p99.toFixed(1)} ms; beside it, enqueue → handler batch start without a delay: p50 ` +
        `${percentile(undelayed, 50).toFixed(1)} ms, p99 ${percentile(undelayed, 99).toFixed(1)} ms\n`,
    );
  });
});

describe('under row-level security', () => {
  it('is enqueued by the app role in its tenant and promoted and delivered by a relay role that is not the owner', async () => {
    const appRole = await createLoginRole(db, 'outbox_app');
    const relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
    roles.push(appRole, relayRole);
    const web = await buildApp({ url: appRole.url });
    apps.push(web);
    const worker = await buildApp({ url: relayRole.url, providers: [DelayedConsumers] });
    apps.push(worker);
    await worker.relay.heartbeat();
    const tenant = TENANTS[1];
    const id = await web.dataSource.transaction(async (manager) => {
      await manager.query(`select set_config('app.current_tenant_id', $1, true)`, [tenant]);
      return web.outbox.enqueue(manager, {
        tenantId: tenant,
        eventName: 'test.dl.a.v1',
        payload: {},
        delayMs: 300,
      });
    });
    await worker.relay.drain();
    expect(await effectIds(db, 'plain')).toEqual([]);
    await waitFor(async () => (await db.sql(`select 1 from event_outbox where deliver_at <= now()`)).length, {
      timeoutMs: 5_000,
    });
    await worker.relay.drain();
    expect(await effectIds(db, 'plain')).toEqual([id]);
  });
});

describe('on the board', () => {
  /** Runs `check` with an app serving the board and `page(path)`: the tenant's board page at `path`, as HTML. */
  async function onBoard(check: (page: (path: string) => Promise<string>) => Promise<void>): Promise<void> {
    const http = await buildHttpApp({
      url: db.url,
      providers: [DelayedConsumers, OperatorGuard] as Type[],
      imports: [OutboxBoardModule.forRoot({ guards: [OperatorGuard], tenants: tenantsOf })],
    });
    try {
      await check(async (path) => {
        const response = await fetch(`${http.baseUrl}/outbox/board/t/${TENANT}${path}`, {
          headers: { 'x-operator': 'alice' },
        });
        expect(response.status).toBe(200);
        return response.text();
      });
    } finally {
      await http.close();
    }
  }

  it("counts the tenant's scheduled events on the overview and shows the status and deliver-at on the event page", () =>
    onBoard(async (page) => {
      const t = await start();
      const [id] = await enqueueManyIn(t, [
        event({ deliverAt: new Date('2099-01-02T03:04:05Z') }),
        event({ delayMs: 3_600_000 }),
      ]);
      expect(await page('')).toMatch(/<td data-testid="events-scheduled">2<\/td>/);
      const eventPage = await page(`/events/${id}`);
      expect(eventPage).toMatch(/scheduled/);
      expect(eventPage).toMatch(/Deliver at[\s\S]*2099-01-02/);
    }));

  it('shows a delayed event due ten minutes ago and never promoted as the oldest pending work', () =>
    onBoard(async (page) => {
      const t = await start();
      const id = await enqueueIn(t, event({ delayMs: 3_600_000 }));
      await db.sql(`update event_outbox set deliver_at = now() - interval '10 minutes' where id = $1`, [id]);
      expect(await page('')).toMatch(/data-testid="oldest-pending">1[01] min/);
    }));
});
