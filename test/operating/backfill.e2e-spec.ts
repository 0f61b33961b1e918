import { Injectable, type CanActivate, type ExecutionContext, type Type } from '@nestjs/common';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxRelay,
  OutboxValidationError,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { OutboxAdminModule, OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { buildHttpApp, type HttpTestApp } from '../support/http-app';
import { OperatorGuard, tenantsOf } from '../support/board-operators';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import {
  EFFECTS_GRANT,
  EFFECTS_TABLE_SQL,
  enqueueIn,
  enqueueManyIn,
  recordEffect,
  TENANT,
  TENANTS,
  truncateOutbox,
  type TestEvent,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';
import { startWebhookReceiver } from '../support/webhook-receiver';

/** The consumer every app of this file hosts from the start. */
@Injectable()
class Early {
  @OnOutboxEvent('test.bf.*', { consumer: 'early' })
  run(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

/** A consumer that joins late, starting from its registration (the default). */
@Injectable()
class Late {
  @OnOutboxEvent('test.bf.*', { consumer: 'late' })
  run(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

/** A late consumer that wants per-aggregate order. */
@Injectable()
class LateOrdered {
  @OnOutboxEvent('test.bf.*', { consumer: 'late-ordered', ordered: true })
  run(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

/** Late consumers that declare where they start: the oldest retained event, and a point in time. */
@Injectable()
class LateWithStart {
  @OnOutboxEvent('test.bf.*', { consumer: 'from-oldest', startFrom: 'oldest' })
  oldest(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent('test.bf.*', { consumer: 'from-2024', startFrom: new Date('2024-01-01T00:00:00Z') })
  since2024(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

let db: TestDatabase;
let relayRole: TestRole | undefined;
const apps: TestApp[] = [];

async function start(providers: Type[], options: { url?: string; relay?: boolean } = {}): Promise<TestApp> {
  const app = await buildApp({
    url: options.url ?? db.url,
    providers,
    outbox: options.relay ? { relay: { enabled: true, pollIntervalMs: 50 } } : undefined,
  });
  apps.push(app);
  if (!options.relay) await app.relay.heartbeat();
  return app;
}

async function stopAll(): Promise<void> {
  while (apps.length > 0) await apps.pop()!.close();
}

const events = (count: number, extra: Partial<TestEvent> = {}): TestEvent[] =>
  Array.from({ length: count }, (_, i) => ({ eventName: 'test.bf.a.v1', payload: { i }, ...extra }));

/** Each consumer's effects per event: `{ consumer: { eventId: times } }`. */
async function effectCounts(consumer: string): Promise<Map<string, number>> {
  const rows = await db.sql<{ event_id: string; n: number }>(
    `select event_id, count(*)::int as n from test_effects where consumer = $1 group by event_id`,
    [consumer],
  );
  return new Map(rows.map((r) => [r.event_id, r.n]));
}

/** Events of history: enqueued and delivered to `early` by an app that does not host the late consumers. */
async function history(batches: TestEvent[]): Promise<string[]> {
  const first = await start([Early]);
  const ids: string[] = [];
  for (let i = 0; i < batches.length; i += 500)
    ids.push(...(await enqueueManyIn(first, batches.slice(i, i + 500))));
  await first.relay.drain();
  await stopAll();
  return ids;
}

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL]);
});
afterAll(async () => {
  await stopAll();
  await db?.drop();
  await relayRole?.drop();
});
beforeEach(async () => {
  await truncateOutbox(db, 'test_effects', 'outbox_backfills', 'outbox_audit');
  await db.sql(`delete from outbox_consumers`);
});
afterEach(stopAll);

describe('a consumer that joins late, backfilled through the admin service', () => {
  it('counts in a dry run the deliveries a backfill would create, and changes nothing', async () => {
    await history([...events(20), ...events(5, { eventName: 'test.bf.b.v1' })]);
    const t = await start([Early, Late]);
    await enqueueIn(t, { eventName: 'test.bf.a.v1', payload: {} }); // pending: the fan-out's, not the backfill's
    const admin = t.app.get(OutboxAdminService);

    const all = await admin.backfill('late', { tenantId: TENANT, since: 'oldest', dryRun: true });
    const onlyB = await admin.backfill('late', {
      tenantId: TENANT,
      since: 'oldest',
      eventNames: ['test.bf.b.*'],
      dryRun: true,
    });

    expect(all).toMatchObject({ dryRun: true, deliveries: 25, finished: false });
    expect(onlyB.deliveries).toBe(5);
    expect(await db.sql(`select 1 from outbox_deliveries where consumer_name = 'late'`)).toHaveLength(0);
    expect(await db.sql(`select 1 from outbox_backfills`)).toHaveLength(0);
  });

  it('gives a late consumer each retained event once, in chunks, audited, and is not repeated', async () => {
    const old = await history(events(25));
    const t = await start([Early, Late]);
    const live = await enqueueIn(t, { eventName: 'test.bf.a.v1', payload: {} });
    const admin = t.app.get(OutboxAdminService);

    const report = await admin.backfill(
      'late',
      { tenantId: TENANT, since: 'oldest', chunkSize: 7, pauseMs: 0 },
      { audit: { actor: 'ops@example.com' } },
    );
    await t.relay.drain();

    expect(report).toMatchObject({ dryRun: false, deliveries: 25, totalCreated: 25, finished: true });
    expect(report.chunks).toBeGreaterThanOrEqual(4);
    const late = await effectCounts('late');
    expect([...late.keys()].sort()).toEqual([...old, live].sort());
    expect([...late.values()].every((n) => n === 1)).toBe(true);
    const [settled] = await db.sql<{ open: number; unsettled: number }>(
      `select sum(deliveries_open)::int as open, count(*) filter (where status <> 'published')::int as unsettled from event_outbox`,
    );
    expect(settled).toEqual({ open: 0, unsettled: 0 });
    const audit = await db.sql(`select actor, action, rows_affected, target from outbox_audit`);
    expect(audit).toEqual([
      expect.objectContaining({
        actor: 'ops@example.com',
        action: 'backfill',
        rows_affected: 25,
        target: expect.objectContaining({ consumer: 'late', backfillId: report.backfillId, finished: true }),
      }),
    ]);

    const again = await admin.backfill('late', { tenantId: TENANT, since: 'oldest' });
    expect(again).toMatchObject({
      backfillId: report.backfillId,
      deliveries: 0,
      totalCreated: 25,
      finished: true,
    });
  });

  it('refuses a consumer that is not registered, or a malformed request, naming the field', async () => {
    const t = await start([Early]);
    const admin = t.app.get(OutboxAdminService);

    await expect(admin.backfill('nobody', { since: 'oldest' })).rejects.toMatchObject({
      constructor: OutboxValidationError,
      field: 'consumer',
    });
    await expect(admin.backfill('early', { since: 'yesterday' as never })).rejects.toMatchObject({
      field: 'since',
    });
    await expect(
      admin.backfill('early', { since: 'oldest', eventNames: ['bad name'] }),
    ).rejects.toMatchObject({
      field: 'eventNames[0]',
    });
  });

  it('backfills while live events flow: each event reaches the new consumer once', async () => {
    const old = await history(events(1_500));
    const t = await start([Early, Late], { relay: true });
    const admin = t.app.get(OutboxAdminService);
    await waitFor(
      async () => (await db.sql(`select 1 from outbox_consumers where name = 'late'`)).length > 0,
    );

    let flowing = true;
    const live: string[] = [];
    const producer = (async () => {
      while (flowing) {
        live.push(await enqueueIn(t, { eventName: 'test.bf.a.v1', payload: { live: true } }));
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const report = await admin.backfill('late', {
      tenantId: TENANT,
      since: 'oldest',
      chunkSize: 100,
      pauseMs: 5,
    });
    flowing = false;
    await producer;

    expect(report.finished).toBe(true);
    expect(live.length).toBeGreaterThan(10);
    const all = [...old, ...live];
    await waitFor(async () => (await effectCounts('late')).size === all.length, {
      timeoutMs: 60_000,
      message: 'every event delivered to late',
    });
    const late = await effectCounts('late');
    expect([...late.values()].filter((n) => n !== 1)).toEqual([]);
    const [pairs] = await db.sql<{ rows: number; events: number }>(
      `select count(*)::int as rows, count(distinct event_id)::int as events from outbox_deliveries where consumer_name = 'late'`,
    );
    expect(pairs).toEqual({ rows: all.length, events: all.length });
  }, 120_000);

  it('waits for an event a relay holds under a lean lease taken before the consumer registered', async () => {
    const [before, leased, after] = await history(events(3));
    const t = await start([Early, Late]);
    const admin = t.app.get(OutboxAdminService);
    // as a lean claim made before "late" registered leaves it: pending, leased, its pairs read without "late"
    await db.sql(`update event_outbox set status = 'pending', published_at = null where id = $1`, [leased]);
    await db.sql(
      `insert into outbox_event_leases (event_id, tenant_id, lease_token, lease_expires_at)
       values ($1, $2, gen_random_uuid(), now() + interval '1 hour')`,
      [leased, TENANT],
    );

    const backfill = admin.backfill('late', { tenantId: TENANT, since: 'oldest', pauseMs: 0 });
    const [stuck] = await waitFor(async () => {
      const rows = await db.sql<{ chunks: number; position_id: string | null }>(
        `select chunks, position_id from outbox_backfills where chunks >= 2`,
      );
      return rows.length > 0 ? rows : null;
    });
    expect(stuck!.position_id).toBe(before);
    expect(await db.sql(`select event_id from outbox_deliveries where consumer_name = 'late'`)).toEqual([
      { event_id: before },
    ]);
    // the relay records that claim's outcome: the event settles without "late"
    await db.sql(`delete from outbox_event_leases where event_id = $1`, [leased]);
    await db.sql(`update event_outbox set status = 'published', published_at = now() where id = $1`, [
      leased,
    ]);

    expect(await backfill).toMatchObject({ deliveries: 3, finished: true });
    await t.relay.drain();
    expect([...(await effectCounts('late')).keys()].sort()).toEqual([before, leased, after].sort());
  });

  it("backfills a webhook consumer: the relay's claim of due deliveries sends each older event once", async () => {
    const receiver = await startWebhookReceiver();
    try {
      const old = await history(events(5));
      const t = await buildApp({
        url: db.url,
        providers: [Early],
        webhooks: {
          webhooks: [
            { name: 'late-hook', url: `${receiver.baseUrl}/hook`, events: ['test.bf.*'], timeoutMs: 2000 },
          ],
        },
      });
      apps.push(t);
      await t.relay.heartbeat();

      const report = await t.app
        .get(OutboxAdminService)
        .backfill('webhook:late-hook', { tenantId: TENANT, since: 'oldest', pauseMs: 0 });
      await t.relay.drain();

      expect(report.deliveries).toBe(5);
      expect(receiver.requests.map((r) => r.id).sort()).toEqual([...old].sort());
    } finally {
      await receiver.close();
    }
  });

  it('resumes after a chunk failed, without creating any delivery twice', async () => {
    const old = await history(events(50));
    const t = await start([Early, Late]);
    const admin = t.app.get(OutboxAdminService);
    // the third chunk's commit of its position fails, as a crash between chunks would leave it
    await db.sql(`create function test_break_backfill() returns trigger language plpgsql as $$
      begin
        if new.chunks >= 3 then raise exception 'test: the backfill dies here'; end if;
        return new;
      end $$`);
    await db.sql(`create trigger test_break_backfill before update on outbox_backfills
                    for each row execute function test_break_backfill()`);

    try {
      await expect(
        admin.backfill('late', { tenantId: TENANT, since: 'oldest', chunkSize: 10, pauseMs: 0 }),
      ).rejects.toThrow('the backfill dies here');
      const [half] = await db.sql<{ n: number }>(
        `select count(*)::int as n from outbox_deliveries where consumer_name = 'late'`,
      );
      expect(half!.n).toBe(20);
    } finally {
      await db.sql(`drop trigger test_break_backfill on outbox_backfills`);
      await db.sql(`drop function test_break_backfill()`);
    }

    const resumed = await admin.backfill('late', {
      tenantId: TENANT,
      since: 'oldest',
      chunkSize: 10,
      pauseMs: 0,
    });
    await t.relay.drain();

    expect(resumed).toMatchObject({ deliveries: 30, totalCreated: 50, finished: true });
    const late = await effectCounts('late');
    expect([...late.keys()].sort()).toEqual([...old].sort());
    expect([...late.values()].every((n) => n === 1)).toBe(true);
  });

  it('stops after its chunk when the app shuts down, and the same backfill resumes in the next app', async () => {
    const old = await history(events(60));
    const first = await start([Early, Late]);
    const stopped = first.app
      .get(OutboxAdminService)
      .backfill('late', { tenantId: TENANT, since: 'oldest', chunkSize: 10, pauseMs: 100 });
    await waitFor(async () => (await db.sql(`select 1 from outbox_backfills where chunks >= 2`)).length > 0);
    await stopAll();
    const partial = await stopped;
    expect(partial.finished).toBe(false);
    expect(partial.totalCreated).toBeLessThan(60);

    const second = await start([Early, Late]);
    const resumed = await second.app
      .get(OutboxAdminService)
      .backfill('late', { tenantId: TENANT, since: 'oldest', chunkSize: 10, pauseMs: 0 });
    await second.relay.drain();

    expect(resumed).toMatchObject({
      deliveries: 60 - partial.totalCreated,
      totalCreated: 60,
      finished: true,
    });
    const late = await effectCounts('late');
    expect([...late.keys()].sort()).toEqual([...old].sort());
    expect([...late.values()].every((n) => n === 1)).toBe(true);
  });

  it('gives an ordered consumer the history of an aggregate before its new events', async () => {
    const aggregate = { aggregateType: 'order', aggregateId: 'o-1' };
    const old = await history([
      ...events(6, aggregate),
      ...events(6, { aggregateType: 'order', aggregateId: 'o-2' }),
    ]);
    const t = await start([Early, LateOrdered]);
    const admin = t.app.get(OutboxAdminService);

    // a slow backfill (one event per chunk) while new events of the aggregate arrive and the relay runs
    const backfill = admin.backfill('late-ordered', {
      tenantId: TENANT,
      since: 'oldest',
      chunkSize: 1,
      pauseMs: 20,
    });
    const fresh: string[] = [];
    for (let i = 0; i < 3; i++) {
      fresh.push(await enqueueIn(t, { eventName: 'test.bf.a.v1', payload: { fresh: i }, ...aggregate }));
      await t.relay.drain();
    }
    await backfill;
    await t.relay.drain();

    const order = await db.sql<{ event_id: string }>(
      `select x.event_id from test_effects x join event_outbox e on e.id = x.event_id
        where x.consumer = 'late-ordered' and e.aggregate_id = 'o-1' order by x.id`,
    );
    expect(order.map((r) => r.event_id)).toEqual([...old.slice(0, 6), ...fresh]);
  });
});

describe('backfill under row-level security', () => {
  beforeAll(async () => {
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
  });

  it('creates the rows of the tenant named, and leaves other tenants untouched', async () => {
    const [a, b] = [TENANTS[0], TENANTS[1]];
    await history([...events(4, { tenantId: a }), ...events(3, { tenantId: b })]);
    const worker = await start([Early, Late], { url: relayRole!.url });
    const admin = worker.app.get(OutboxAdminService);

    expect((await admin.backfill('late', { tenantId: b, since: 'oldest', dryRun: true })).deliveries).toBe(3);
    const report = await admin.backfill('late', { tenantId: b, since: 'oldest', pauseMs: 0 });
    await worker.relay.drain();

    expect(report.deliveries).toBe(3);
    const rows = await db.sql<{ tenant_id: string; n: number }>(
      `select tenant_id, count(*)::int as n from outbox_deliveries where consumer_name = 'late' group by tenant_id`,
    );
    expect(rows).toEqual([{ tenant_id: b, n: 3 }]);
    expect((await effectCounts('late')).size).toBe(3);
  });
});

describe('startFrom on @OnOutboxEvent', () => {
  it("backfills 'oldest' and a Date once, at boot, and not again at the next boot", async () => {
    const ids = await history(events(10));
    // four events from before 2024
    await db.sql(`update event_outbox set created_at = '2020-06-01' where id = any($1::uuid[])`, [
      ids.slice(0, 4),
    ]);

    await start([Early, LateWithStart], { relay: true });
    await waitFor(
      async () =>
        (await effectCounts('from-oldest')).size === 10 && (await effectCounts('from-2024')).size === 6,
      { timeoutMs: 20_000, message: 'the boot backfills delivered' },
    );
    const backfills = await db.sql<{ consumer_name: string; created_rows: string; finished: boolean }>(
      `select consumer_name, created_rows, finished_at is not null as finished from outbox_backfills order by consumer_name`,
    );
    expect(backfills).toEqual([
      { consumer_name: 'from-2024', created_rows: '6', finished: true },
      { consumer_name: 'from-oldest', created_rows: '10', finished: true },
    ]);
    await stopAll();

    const again = await start([Early, LateWithStart], { relay: true });
    const live = await enqueueIn(again, { eventName: 'test.bf.a.v1', payload: {} });
    await waitFor(async () => (await effectCounts('from-oldest')).has(live));
    expect((await effectCounts('from-oldest')).size).toBe(11);
    expect([...(await effectCounts('from-oldest')).values()].every((n) => n === 1)).toBe(true);
    expect(await db.sql(`select created_rows from outbox_backfills order by consumer_name`)).toEqual([
      { created_rows: '6' },
      { created_rows: '10' },
    ]);
  });

  it('refuses at boot a startFrom that is neither a start nor a Date in the past, naming the handler', async () => {
    @Injectable()
    class Wrong {
      @OnOutboxEvent('test.bf.*', { consumer: 'wrong', startFrom: 'beginning' as never })
      run(): void {}

      @OnOutboxEvent('test.bf.*', { consumer: 'future', startFrom: new Date(Date.now() + 86_400_000) })
      later(): void {}
    }
    const boot = buildApp({ url: db.url, providers: [Wrong] });
    await expect(boot).rejects.toBeInstanceOf(OutboxConfigurationError);
    await expect(boot).rejects.toThrow(/startFrom of Wrong#run.*\n.*startFrom of Wrong#later/s);
  });
});

/** Lets an admin route through when the request carries `x-admin: yes`. */
@Injectable()
class HeaderGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    return (
      context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-admin'] === 'yes'
    );
  }
}

describe('backfill over HTTP: the admin route and the board form', () => {
  let http: HttpTestApp;
  const board = () => `${http.baseUrl}/outbox/board/t/${TENANT}`;

  /** The app, once history is written (an app hosting "late" earlier would fan the history out to it). */
  const serve = async (): Promise<void> => {
    http = await buildHttpApp({
      url: db.url,
      providers: [Early, Late, HeaderGuard, OperatorGuard],
      imports: [
        OutboxAdminModule.forRoot({ guards: [HeaderGuard] }),
        OutboxBoardModule.forRoot({ guards: [OperatorGuard], tenants: tenantsOf }),
      ],
    });
    await http.app.get(OutboxRelay).heartbeat();
  };
  afterEach(async () => {
    await http?.close();
  });

  const lateRows = async () =>
    (
      await db.sql<{ n: number }>(
        `select count(*)::int as n from outbox_deliveries where consumer_name = 'late'`,
      )
    )[0]!.n;

  it('runs behind the admin guard: a dry run, then the backfill', async () => {
    await history(events(4));
    await serve();
    const route = `${http.baseUrl}/outbox/tenants/${TENANT}/consumers/late/backfill`;
    const call = async (body: unknown, admin = true) => {
      const response = await fetch(route, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(admin ? { 'x-admin': 'yes' } : {}) },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    expect((await call({ since: 'oldest' }, false)).status).toBe(403);
    expect(await call({ since: 'last week' })).toMatchObject({ status: 400, body: { field: 'since' } });
    expect(await call({ since: 'oldest', dryRun: true })).toMatchObject({
      status: 200,
      body: { dryRun: true, deliveries: 4 },
    });
    expect(await lateRows()).toBe(0);
    const started = await call({ since: '2000-01-01T00:00:00Z' });
    expect(started).toMatchObject({ status: 202, body: { deliveries: 4 } });
    await waitFor(async () => (await lateRows()) === 4, { message: 'the backfill in the background' });
    const list = await fetch(`${http.baseUrl}/outbox/tenants/${TENANT}/consumers/late/backfills`, {
      headers: { 'x-admin': 'yes' },
    });
    await waitFor(
      async () => (await db.sql(`select 1 from outbox_backfills where finished_at is not null`)).length,
    );
    expect(await list.json()).toEqual([
      expect.objectContaining({ backfillId: started.body.backfillId, consumer: 'late', tenantId: TENANT }),
    ]);
    const bad = await fetch(`${http.baseUrl}/outbox/tenants/not-a-uuid/consumers/late/backfills`, {
      headers: { 'x-admin': 'yes' },
    });
    expect({ status: bad.status, field: ((await bad.json()) as { field?: string }).field }).toEqual({
      status: 400,
      field: 'tenantId',
    });
  });

  it('offers a form on the consumers page that shows the dry-run count before the confirmation, and audits the run', async () => {
    await history(events(3));
    await serve();
    const page = await fetch(`${board()}/consumers`, { headers: { 'x-operator': 'alice' } });
    const html = await page.text();
    const cookie =
      page.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .find((c) => c.startsWith('outbox-board-csrf=')) ?? '';
    const form = /<form[^>]*data-testid="backfill-form"[\s\S]*?<\/form>/.exec(html)?.[0] ?? '';
    const token = /name="_csrf" value="([^"]*)"/.exec(form)?.[1] ?? '';
    expect(form).toContain('<option value="late">');
    expect(token).not.toBe('');
    const post = (to: 'confirm' | 'act', fields: Record<string, string>) =>
      fetch(`${board()}/${to}`, {
        method: 'POST',
        headers: {
          'x-operator': 'alice',
          'content-type': 'application/x-www-form-urlencoded',
          cookie,
          origin: 'null',
        },
        body: new URLSearchParams(fields).toString(),
        redirect: 'manual',
      });
    const fields = {
      action: 'backfill-consumer',
      consumer: 'late',
      since: 'oldest',
      eventNames: 'test.bf.*',
    };

    expect((await post('act', fields)).status).toBe(403); // no token: refused before anything runs
    const confirm = await post('confirm', { ...fields, _csrf: token });
    const confirmation = await confirm.text();
    expect(confirm.status).toBe(200);
    expect(confirmation).toContain('Backfill consumer late');
    expect(/data-testid="dry-run">\s*Dry run: <strong>3<\/strong>/.exec(confirmation)).not.toBeNull();
    expect(await lateRows()).toBe(0);

    const act = await post('act', { ...fields, _csrf: token });
    expect(act.status).toBe(303);
    expect(act.headers.get('location')).toBe(`/outbox/board/t/${TENANT}/consumers?done=backfilling&n=3`);
    const audit = await waitFor(async () => {
      const rows = await db.sql(`select actor, action, rows_affected from outbox_audit`);
      return rows.length > 0 ? rows : null;
    });
    expect(audit).toEqual([{ actor: 'alice', action: 'backfill', rows_affected: 3 }]);
    expect(await lateRows()).toBe(3);
  });
});
