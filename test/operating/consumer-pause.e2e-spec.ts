import { Injectable, type CanActivate, type ExecutionContext, type Type } from '@nestjs/common';
import {
  OnOutboxEvent,
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
import {
  EFFECTS_TABLE_SQL,
  effects,
  enqueueManyIn,
  recordEffect,
  TENANT,
  TENANTS,
  truncateOutbox,
  type TestEvent,
} from '../support/outbox-fixture';
import { waitFor } from '../support/wait-for';

/** Three consumers of the same events: one to pause, one that goes on, one ordered. */
@Injectable()
class PauseConsumers {
  @OnOutboxEvent('test.pz.*', { consumer: 'paused' })
  paused(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent('test.pz.*', { consumer: 'other' })
  other(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }

  @OnOutboxEvent('test.pz.*', { consumer: 'ordered', ordered: true })
  ordered(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordEffect(event, context);
  }
}

let db: TestDatabase;
const apps: TestApp[] = [];

async function start(options: { relay?: boolean } = {}): Promise<TestApp> {
  const app = await buildApp({
    url: db.url,
    providers: [PauseConsumers],
    outbox: options.relay ? { relay: { enabled: true, pollIntervalMs: 50 } } : undefined,
  });
  apps.push(app);
  await app.relay.heartbeat();
  return app;
}

async function stopAll(): Promise<void> {
  while (apps.length > 0) await apps.pop()!.close();
}

const events = (count: number, extra: Partial<TestEvent> = {}): TestEvent[] =>
  Array.from({ length: count }, (_, i) => ({ eventName: 'test.pz.a.v1', payload: { i }, ...extra }));

/** How many effects each event got from `consumer`: `{ eventId: times }`. */
async function effectCounts(consumer: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const e of await effects(db, consumer)) counts[e.event_id] = (counts[e.event_id] ?? 0) + 1;
  return counts;
}

const once = (ids: readonly string[]): Record<string, number> => Object.fromEntries(ids.map((id) => [id, 1]));

/** The delivery rows of `consumer`: status and attempts, per tenant. */
async function rowsOf(
  consumer: string,
): Promise<{ tenant_id: string; status: string; attempt_count: number }[]> {
  return db.sql(
    `select tenant_id, status, attempt_count from outbox_deliveries where consumer_name = $1 order by event_seq`,
    [consumer],
  );
}

beforeAll(async () => {
  db = await createTestDatabase([EFFECTS_TABLE_SQL]);
});
afterAll(async () => {
  await stopAll();
  await db?.drop();
});
beforeEach(async () => {
  await truncateOutbox(db, 'test_effects', 'outbox_consumer_pauses', 'outbox_audit');
});
afterEach(stopAll);

describe('a consumer paused through the admin service', () => {
  it('gets none of the events enqueued while paused for every tenant, and each once, charged one attempt, after resuming; its other consumers get them at once', async () => {
    const t = await start();
    const admin = t.app.get(OutboxAdminService);
    expect(await admin.pauseConsumer('paused', { reason: 'partner down' })).toBe(true);
    expect(await admin.pauseConsumer('paused')).toBe(false); // paused already: kept as it was

    const first = await enqueueManyIn(t, events(5));
    const second = await enqueueManyIn(t, events(3, { tenantId: TENANTS[1] }));
    await t.relay.drain();

    expect(await effectCounts('other')).toEqual(once([...first, ...second]));
    expect(await effectCounts('paused')).toEqual({});
    const waiting = await rowsOf('paused');
    expect(waiting).toHaveLength(8);
    expect(waiting.every((r) => r.status === 'pending' && r.attempt_count === 0)).toBe(true);
    expect((await admin.stats(TENANT)).pausedConsumers).toEqual([
      expect.objectContaining({ consumer: 'paused', tenantId: null, reason: 'partner down' }),
    ]);

    expect(await admin.resumeConsumer('paused')).toBe(true);
    expect(await admin.resumeConsumer('paused')).toBe(false);
    await t.relay.drain();
    expect(await effectCounts('paused')).toEqual(once([...first, ...second]));
    expect((await effects(db, 'paused')).every((e) => e.attempt === 1)).toBe(true);
    expect(await effectCounts('other')).toEqual(once([...first, ...second]));
    expect((await admin.stats(TENANT)).pausedConsumers).toEqual([]);
  });

  it('holds only the paused tenant when paused for one: the other tenants get theirs', async () => {
    const t = await start();
    const admin = t.app.get(OutboxAdminService);
    await admin.pauseConsumer('paused', { tenantId: TENANT });

    const held = await enqueueManyIn(t, events(4));
    const free = await enqueueManyIn(t, events(2, { tenantId: TENANTS[1] }));
    await t.relay.drain();

    expect(await effectCounts('paused')).toEqual(once(free));
    expect(await effectCounts('other')).toEqual(once([...held, ...free]));
    expect((await admin.stats(TENANTS[1])).pausedConsumers).toEqual([]);
    expect((await admin.stats(TENANT)).pausedConsumers).toEqual([
      expect.objectContaining({ consumer: 'paused', tenantId: TENANT }),
    ]);
    // lifting the pause of every tenant leaves a tenant's own pause in force
    expect(await admin.resumeConsumer('paused')).toBe(false);

    await admin.resumeConsumer('paused', { tenantId: TENANT });
    await t.relay.drain();
    expect(await effectCounts('paused')).toEqual(once([...held, ...free]));
  });

  it('delivers to an ordered consumer, once resumed, in the order of each aggregate', async () => {
    const t = await start();
    const admin = t.app.get(OutboxAdminService);
    await admin.pauseConsumer('ordered', { tenantId: TENANT });
    const ids: string[] = [];
    // interleaved aggregates, in several transactions
    for (let round = 0; round < 3; round++)
      ids.push(
        ...(await enqueueManyIn(t, [
          { eventName: 'test.pz.a.v1', aggregateType: 'order', aggregateId: 'A', payload: { round } },
          { eventName: 'test.pz.a.v1', aggregateType: 'order', aggregateId: 'B', payload: { round } },
        ])),
      );
    await t.relay.drain();
    expect(await effectCounts('ordered')).toEqual({});
    expect((await rowsOf('ordered')).every((r) => r.status === 'pending' && r.attempt_count === 0)).toBe(
      true,
    );

    await admin.resumeConsumer('ordered', { tenantId: TENANT });
    await t.relay.drain();
    const delivered = (await effects(db, 'ordered')).map((e) => e.event_id);
    expect([...delivered].sort()).toEqual([...ids].sort());
    const a = ids.filter((_, i) => i % 2 === 0);
    const b = ids.filter((_, i) => i % 2 === 1);
    expect(delivered.filter((id) => a.includes(id))).toEqual(a);
    expect(delivered.filter((id) => b.includes(id))).toEqual(b);
  });

  it('does not make outbox_due_tenants list a tenant whose only due work is paused', async () => {
    const t = await start();
    const admin = t.app.get(OutboxAdminService);
    await admin.pauseConsumer('paused', { tenantId: TENANT });
    await enqueueManyIn(t, events(3));
    await t.relay.drain();
    expect((await rowsOf('paused')).map((r) => r.status)).toEqual(['pending', 'pending', 'pending']);
    const due = () => db.sql<{ tenant_id: string }>(`select tenant_id from outbox_due_tenants(10, null)`);

    expect(await due()).toEqual([]);
    await admin.resumeConsumer('paused', { tenantId: TENANT });
    expect(await due()).toEqual([{ tenant_id: TENANT }]);
  });

  it('says a pair whose hold has expired was not paused: resuming it returns false, and no audit row counts it', async () => {
    const t = await start();
    const admin = t.app.get(OutboxAdminService);
    // a webhook's Retry-After hold that ended a second ago (its row stays until the pair is held or resumed again)
    await db.sql(
      `insert into outbox_consumer_pauses (consumer_name, tenant_id, paused_by, reason, resumes_at)
       values ('paused', $1, 'relay', 'HTTP 429', now() - interval '1 second')`,
      [TENANT],
    );
    expect(await admin.pausedConsumers()).toEqual([]);

    expect(await admin.resumeConsumer('paused', { tenantId: TENANT }, { audit: { actor: 'ops' } })).toBe(
      false,
    );
    const [entry] = await admin.auditLog(TENANT);
    expect(entry).toMatchObject({ action: 'resumeConsumer', rows: 0 });
  });

  it('refuses an unknown consumer, a tenant id that is not a UUID and a reason too long, naming the field', async () => {
    const t = await start();
    const admin = t.app.get(OutboxAdminService);
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => null,
        (error: unknown) => error,
      );

    const unknown = await refusal(admin.pauseConsumer('no-such-consumer'));
    expect(unknown).toBeInstanceOf(OutboxValidationError);
    expect(unknown).toMatchObject({ field: 'consumer' });
    expect((unknown as Error).message).toContain('no-such-consumer');
    expect(await refusal(admin.pauseConsumer('paused', { tenantId: 'tenant-1' }))).toMatchObject({
      field: 'tenantId',
    });
    expect(await refusal(admin.pauseConsumer('paused', { reason: 'x'.repeat(501) }))).toMatchObject({
      field: 'reason',
    });
    expect(await db.sql(`select 1 from outbox_consumer_pauses`)).toEqual([]);
  });
});

describe('a pause across relay instances', () => {
  it('holds in two relay apps on one database, and either delivers after the resume, each event once', async () => {
    const one = await start({ relay: true });
    const two = await start({ relay: true });
    await one.app.get(OutboxAdminService).pauseConsumer('paused');

    const ids = [
      ...(await enqueueManyIn(one, events(20))),
      ...(await enqueueManyIn(two, events(20, { tenantId: TENANTS[1] }))),
    ];
    await waitFor(async () => Object.keys(await effectCounts('other')).length === ids.length, {
      message: 'the consumer not paused gets every event',
    });
    // both relays look again now: neither hands the paused consumer anything
    await Promise.all([one.relay.drain(), two.relay.drain()]);
    expect(await effectCounts('paused')).toEqual({});
    expect((await rowsOf('paused')).every((r) => r.status === 'pending' && r.attempt_count === 0)).toBe(true);

    await two.app.get(OutboxAdminService).resumeConsumer('paused');
    await waitFor(async () => Object.keys(await effectCounts('paused')).length === ids.length, {
      message: 'the resumed consumer gets every event',
    });
    await Promise.all([one.relay.drain(), two.relay.drain()]);
    expect(await effectCounts('paused')).toEqual(once(ids));
    expect(await effectCounts('other')).toEqual(once(ids));
  });
});

/** The admin routes' guard: an `x-admin` header, the operator on `request.user`. */
@Injectable()
class AdminGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string>; user?: unknown }>();
    if (request.headers['x-admin'] !== 'yes') return false;
    request.user = { id: 'ops-bot' };
    return true;
  }
}

describe('pause and resume over HTTP: the admin routes and the board', () => {
  let http: HttpTestApp;
  const board = () => `${http.baseUrl}/outbox/board/t/${TENANT}`;

  beforeEach(async () => {
    http = await buildHttpApp({
      url: db.url,
      providers: [PauseConsumers, AdminGuard, OperatorGuard] as Type[],
      imports: [
        OutboxAdminModule.forRoot({ guards: [AdminGuard] }),
        OutboxBoardModule.forRoot({ guards: [OperatorGuard], tenants: tenantsOf }),
      ],
    });
    await http.app.get(OutboxRelay).heartbeat();
  });
  afterEach(async () => {
    await http?.close();
  });

  const pauses = () =>
    db.sql<{ consumer_name: string; tenant_id: string | null; paused_by: string; reason: string | null }>(
      `select consumer_name, tenant_id, paused_by, reason from outbox_consumer_pauses order by tenant_id nulls first`,
    );
  const audit = () =>
    db.sql(`select tenant_id, actor, action, target, rows_affected from outbox_audit order by id`);

  it('pauses and resumes behind the guard, one tenant or every tenant, with an audit row each, and answers 400 for bad input', async () => {
    const call = async (path: string, body: unknown = {}, admin = true) => {
      const response = await fetch(`${http.baseUrl}/outbox/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(admin ? { 'x-admin': 'yes' } : {}) },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    expect((await call(`consumers/paused/pause`, {}, false)).status).toBe(403);
    expect(await call(`consumers/nobody/pause`)).toMatchObject({ status: 400, body: { field: 'consumer' } });
    expect(await call(`tenants/not-a-uuid/consumers/paused/pause`)).toMatchObject({
      status: 400,
      body: { field: 'tenantId' },
    });
    expect(await call(`tenants/${TENANT}/consumers/paused/resume`)).toEqual({
      status: 200,
      body: { resumed: false },
    });
    expect(await pauses()).toEqual([]);

    expect(await call(`tenants/${TENANT}/consumers/paused/pause`, { reason: 'maintenance' })).toEqual({
      status: 200,
      body: { paused: true },
    });
    expect(await call(`consumers/other/pause`)).toEqual({ status: 200, body: { paused: true } });
    expect(await pauses()).toEqual([
      { consumer_name: 'other', tenant_id: null, paused_by: 'ops-bot', reason: null },
      { consumer_name: 'paused', tenant_id: TENANT, paused_by: 'ops-bot', reason: 'maintenance' },
    ]);
    const listed = await fetch(`${http.baseUrl}/outbox/consumers/paused`, { headers: { 'x-admin': 'yes' } });
    expect(((await listed.json()) as unknown[]).length).toBe(2);
    const stats = await fetch(`${http.baseUrl}/outbox/tenants/${TENANT}/stats`, {
      headers: { 'x-admin': 'yes' },
    });
    expect(((await stats.json()) as { pausedConsumers: { consumer: string }[] }).pausedConsumers).toEqual([
      expect.objectContaining({ consumer: 'other', tenantId: null }),
      expect.objectContaining({ consumer: 'paused', tenantId: TENANT }),
    ]);

    expect(await call(`tenants/${TENANT}/consumers/paused/resume`)).toEqual({
      status: 200,
      body: { resumed: true },
    });
    expect(await call(`consumers/other/resume`)).toEqual({ status: 200, body: { resumed: true } });
    expect(await pauses()).toEqual([]);
    const NIL = '00000000-0000-0000-0000-000000000000';
    expect(await audit()).toEqual([
      // the refused and the idle calls wrote nothing but the resume that found no pause
      {
        tenant_id: TENANT,
        actor: 'ops-bot',
        action: 'resumeConsumer',
        target: { consumer: 'paused', allTenants: false },
        rows_affected: 0,
      },
      {
        tenant_id: TENANT,
        actor: 'ops-bot',
        action: 'pauseConsumer',
        target: { consumer: 'paused', allTenants: false, reason: 'maintenance' },
        rows_affected: 1,
      },
      {
        tenant_id: NIL,
        actor: 'ops-bot',
        action: 'pauseConsumer',
        target: { consumer: 'other', allTenants: true, reason: null },
        rows_affected: 1,
      },
      expect.objectContaining({ tenant_id: TENANT, action: 'resumeConsumer', rows_affected: 1 }),
      expect.objectContaining({ tenant_id: NIL, action: 'resumeConsumer', rows_affected: 1 }),
    ]);
  });

  it('offers Pause and Resume on the consumers page, each confirmed and CSRF-protected, and audits them', async () => {
    const page = async () => {
      const response = await fetch(`${board()}/consumers`, { headers: { 'x-operator': 'alice' } });
      const cookie =
        response.headers
          .getSetCookie()
          .map((c) => c.split(';')[0])
          .find((c) => c.startsWith('outbox-board-csrf=')) ?? '';
      const html = await response.text();
      return { html, cookie, token: /name="_csrf" value="([^"]*)"/.exec(html)?.[1] ?? '' };
    };
    const first = await page();
    expect(first.html).toContain('aria-label="Pause consumer paused"');
    const post = (to: 'confirm' | 'act', fields: Record<string, string>) =>
      fetch(`${board()}/${to}`, {
        method: 'POST',
        headers: {
          'x-operator': 'alice',
          'content-type': 'application/x-www-form-urlencoded',
          cookie: first.cookie,
          origin: 'null',
        },
        body: new URLSearchParams(fields).toString(),
        redirect: 'manual',
      });
    const pause = { action: 'pause-consumer', consumer: 'paused' };

    expect((await post('act', pause)).status).toBe(403); // no token: refused before anything runs
    const confirm = await post('confirm', { ...pause, _csrf: first.token });
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain('Pause consumer paused');
    expect(await pauses()).toEqual([]); // the confirmation page changes nothing

    const act = await post('act', { ...pause, _csrf: first.token });
    expect(act.status).toBe(303);
    expect(act.headers.get('location')).toBe(`/outbox/board/t/${TENANT}/consumers?done=consumer-paused&n=1`);
    expect(await pauses()).toEqual([
      { consumer_name: 'paused', tenant_id: TENANT, paused_by: 'alice', reason: null },
    ]);
    const after = await page();
    expect(after.html).toContain('aria-label="Resume consumer paused"');

    const resumed = await post('act', { action: 'resume-consumer', consumer: 'paused', _csrf: first.token });
    expect(resumed.headers.get('location')).toBe(
      `/outbox/board/t/${TENANT}/consumers?done=consumer-resumed&n=1`,
    );
    expect(await pauses()).toEqual([]);
    expect(await audit()).toEqual([
      expect.objectContaining({
        tenant_id: TENANT,
        actor: 'alice',
        action: 'pauseConsumer',
        rows_affected: 1,
      }),
      expect.objectContaining({
        tenant_id: TENANT,
        actor: 'alice',
        action: 'resumeConsumer',
        rows_affected: 1,
      }),
    ]);
  });
});
