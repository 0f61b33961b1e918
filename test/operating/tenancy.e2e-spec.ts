import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxError,
  SINGLE_TENANT_ID,
  type OutboxEvent,
  type OutboxHandlerContext,
} from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import { buildApp, type TestApp } from '../support/build-app';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createLoginRole, type TestRole } from '../support/test-roles';
import { EFFECTS_GRANT, EFFECTS_TABLE_SQL, recordEffect, truncateTables } from '../support/outbox-fixture';

const A = '0a0a0a0a-0000-4000-8000-00000000000a';
const B = '0b0b0b0b-0000-4000-8000-00000000000b';
const SETTING = 'app.current_tenant_id';

/** One consumer that always succeeds and one that dead-letters an event whose payload says `fail`. */
@Injectable()
class TenantConsumers {
  @OnOutboxEvent('test.tenant.v1', { consumer: 'steady' })
  async steady(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    await recordEffect(event, context);
  }

  @OnOutboxEvent('test.tenant.v1', { consumer: 'fragile', maxAttempts: 1 })
  fragile(event: OutboxEvent): void {
    if ((event.data as { fail?: boolean }).fail) throw new Error('planned failure');
  }
}

/** The default schema, and one of the app's own: every test below runs in each. */
const SCHEMAS = ['public', 'tenant_outbox'];

describe.each(SCHEMAS)('tenancy and row-level security on non-owner roles, schema %s', (schema) => {
  /** The outbox's tables and functions in this schema, for the raw SQL of the tests. */
  const n = outboxNames(schema);
  let db: TestDatabase;
  let appRole: TestRole;
  let relayRole: TestRole;
  /** The web app: enqueues on the app role, no relay, no consumers. */
  let web: TestApp;
  /** The worker: relay and admin service on the relay role, one pooled connection (to see what it leaves behind). */
  let worker: TestApp;
  let admin: OutboxAdminService;

  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL], { schema });
    appRole = await createLoginRole(db, 'outbox_app');
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
    web = await buildApp({ url: appRole.url, outbox: { schema } });
    worker = await buildApp({
      url: relayRole.url,
      providers: [TenantConsumers],
      poolSize: 1,
      outbox: { schema },
    });
    admin = worker.app.get(OutboxAdminService);
    await worker.relay.heartbeat();
  });
  afterAll(async () => {
    await web?.close();
    await worker?.close();
    await db?.drop();
    await appRole?.drop();
    await relayRole?.drop();
  });
  beforeEach(async () => {
    await truncateTables(db, `${n.events}, ${n.deliveries}, ${n.inbox}, test_effects`);
  });

  /** Enqueues through the web app in a transaction whose tenant context is `context` (or none). */
  const enqueueAs = (context: string | null, tenantId: string, payload: Record<string, unknown> = {}) =>
    web.dataSource.transaction(async (manager) => {
      if (context) await manager.query('select set_config($1, $2, true)', [SETTING, context]);
      return web.outbox.enqueue(manager, { tenantId, eventName: 'test.tenant.v1', payload });
    });
  /** Runs `work` on a connection of `role` inside a transaction whose tenant context is `tenant`, then rolls back. */
  const inTenant = async <T>(
    role: TestRole,
    tenant: string | null,
    work: (client: Client) => Promise<T>,
  ): Promise<T> => {
    const client = new Client({ connectionString: role.url });
    await client.connect();
    try {
      await client.query('begin');
      if (tenant) await client.query('select set_config($1, $2, true)', [SETTING, tenant]);
      return await work(client);
    } finally {
      await client.query('rollback').catch(() => undefined);
      await client.end();
    }
  };
  /** One delivered and one dead-lettered event per tenant. */
  const seedBothTenants = async (): Promise<{ a: string; aFailed: string; b: string; bFailed: string }> => {
    const ids = {
      a: await enqueueAs(A, A),
      aFailed: await enqueueAs(A, A, { fail: true }),
      b: await enqueueAs(B, B),
      bFailed: await enqueueAs(B, B, { fail: true }),
    };
    await worker.relay.drain();
    return ids;
  };

  it('connects as roles that are neither superuser nor owner of the outbox tables', async () => {
    for (const dataSource of [web.dataSource, worker.dataSource] as DataSource[]) {
      const [row] = await dataSource.query(
        `select r.rolsuper, r.rolbypassrls, pg_has_role(current_user, t.tableowner, 'member') as owner
           from pg_roles r, pg_tables t
          where r.rolname = current_user and t.schemaname = $1 and t.tablename = 'event_outbox'`,
        [schema],
      );
      expect(row).toEqual({ rolsuper: false, rolbypassrls: false, owner: false });
    }
  });

  it("enqueues for the transaction's own tenant, and the relay delivers it under that tenant's context", async () => {
    const id = await enqueueAs(A, A);
    await worker.relay.drain();
    expect(await db.sql(`select status, tenant_id from ${n.events} where id = $1`, [id])).toEqual([
      { status: 'published', tenant_id: A },
    ]);
  });

  it('refuses an event for tenant B from a transaction whose context is tenant A, or has no tenant at all', async () => {
    await expect(enqueueAs(A, B)).rejects.toThrow(OutboxError);
    await expect(enqueueAs(A, B)).rejects.toThrow(
      /row-level security refused an event for tenant .*set_config/,
    );
    await expect(enqueueAs(null, A)).rejects.toThrow(/row-level security/);
    expect(await db.sql(`select count(*)::int as n from ${n.events}`)).toEqual([{ n: 0 }]);
  });

  it('gives the app role no way to read the outbox or to call the functions that cross tenants', async () => {
    await enqueueAs(A, A);
    await expect(inTenant(appRole, A, (c) => c.query(`select count(*) from ${n.events}`))).rejects.toThrow(
      /permission denied/,
    );
    await expect(inTenant(appRole, A, (c) => c.query(`select * from ${n.deliveries}`))).rejects.toThrow(
      /permission denied/,
    );
    await expect(inTenant(appRole, A, (c) => c.query(`select ${n.purgeSettled}(now(), 10)`))).rejects.toThrow(
      /permission denied/,
    );
    await expect(inTenant(appRole, A, (c) => c.query(`select ${n.dueTenants}(10)`))).rejects.toThrow(
      /permission denied/,
    );
  });

  it("lets tenant A's context see, count, update, delete and insert none of tenant B's rows in raw SQL on the relay role", async () => {
    const ids = await seedBothTenants();
    const before = await db.sql(`select * from ${n.events} order by id`);
    await inTenant(relayRole, A, async (c) => {
      expect(
        (await c.query(`select tenant_id, count(*)::int as n from ${n.events} group by tenant_id`)).rows,
      ).toEqual([{ tenant_id: A, n: 2 }]);
      expect(
        (await c.query(`select count(*)::int as n from ${n.events} where id = $1`, [ids.b])).rows,
      ).toEqual([{ n: 0 }]);
      expect(
        (await c.query(`select count(*)::int as n from ${n.deliveries} where tenant_id = $1`, [B])).rows,
      ).toEqual([{ n: 0 }]);
      expect(
        (await c.query(`select count(*)::int as n from ${n.inbox} where tenant_id = $1`, [B])).rows,
      ).toEqual([{ n: 0 }]);
      expect(
        (
          await c.query(
            `update ${n.deliveries} set status = 'pending', attempt_count = 0 where tenant_id = $1`,
            [B],
          )
        ).rowCount,
      ).toBe(0);
      expect((await c.query(`delete from ${n.inbox} where tenant_id = $1`, [B])).rowCount).toBe(0);
      expect((await c.query(`delete from ${n.deliveries} where tenant_id = $1`, [B])).rowCount).toBe(0);
      expect((await c.query(`delete from ${n.events} where tenant_id = $1`, [B])).rowCount).toBe(0);
      await expect(
        c.query(
          `insert into ${n.events} (id, tenant_id, event_name, payload) values (gen_random_uuid(), $1, 'test.tenant.v1', '{}')`,
          [B],
        ),
      ).rejects.toThrow(/row-level security/);
    });
    await inTenant(relayRole, null, async (c) => {
      expect((await c.query(`select count(*)::int as n from ${n.events}`)).rows).toEqual([{ n: 0 }]);
    });
    expect(await db.sql(`select * from ${n.events} order by id`)).toEqual(before);
  });

  it("lets tenant A's context see, count, replay or purge none of tenant B's rows through the admin service", async () => {
    const ids = await seedBothTenants();
    const stats = await admin.stats(A);
    expect(stats.events).toMatchObject({ published: 1, failed: 1 });
    expect(stats.consumers).toEqual({
      fragile: { pending: 0, processing: 0, delivered: 1, failed: 0, dead: 1 },
      steady: { pending: 0, processing: 0, delivered: 2, failed: 0, dead: 0 },
    });
    expect((await admin.failedEvents(A)).items.map((e) => e.eventId)).toEqual([ids.aFailed]);
    expect(await admin.deliveries(A, ids.bFailed)).toBeNull();
    expect(await admin.replayEvent(A, ids.bFailed)).toBe(0);
    expect(await admin.replayFailed(A, { consumer: 'fragile' })).toBe(1);
    expect(await admin.purgeEvent(A, ids.b)).toBe(false);
    expect(await admin.purgeFailed(A)).toBe(0); // A's failed event was replayed: it has an open delivery again

    expect(
      await db.sql(`select status from ${n.deliveries} where event_id = $1 and consumer_name = $2`, [
        ids.bFailed,
        'fragile',
      ]),
    ).toEqual([{ status: 'dead' }]);
    expect(await db.sql(`select count(*)::int as n from ${n.events} where tenant_id = $1`, [B])).toEqual([
      { n: 2 },
    ]);
    expect(await admin.replayEvent(B, ids.bFailed)).toBe(1);
  });

  it("lets tenant A's context find, bulk-replay or bulk-purge none of tenant B's rows through the admin service", async () => {
    const ids = await seedBothTenants();
    expect(
      (await admin.searchEvents(A, { eventName: 'test.tenant.v1' })).items.map((e) => e.eventId),
    ).toEqual([ids.aFailed, ids.a]);
    expect((await admin.searchEvents(A, { eventId: ids.bFailed })).items).toEqual([]);
    expect(await admin.purgeMatching(A, { consumer: 'fragile', dryRun: true })).toMatchObject({ count: 1 });
    expect(await admin.replayMatching(A, { consumer: 'fragile' }, { audit: { actor: 'ops' } })).toEqual({
      dryRun: false,
      count: 1,
      chunks: 1,
    });
    await worker.relay.drain(); // the replayed delivery fails again: dead once more
    expect(await admin.purgeMatching(A, { consumer: 'fragile' }, { audit: { actor: 'ops' } })).toMatchObject({
      count: 1,
    });
    expect(await db.sql(`select id from ${n.events} where tenant_id = $1 order by id`, [B])).toEqual(
      [ids.b, ids.bFailed].sort().map((id) => ({ id })),
    );
    expect(
      await db.sql(`select status from ${n.deliveries} where event_id = $1 and consumer_name = 'fragile'`, [
        ids.bFailed,
      ]),
    ).toEqual([{ status: 'dead' }]);
    expect(await admin.auditLog(A)).toMatchObject([
      { action: 'purgeMatching' },
      { action: 'replayMatching' },
    ]);
  });

  it('leaves no tenant context on the pooled connection after an admin call', async () => {
    await admin.stats(A);
    await admin.replayFailed(B);
    const [row] = await worker.dataSource.query('select coalesce(current_setting($1, true), $2) as tenant', [
      SETTING,
      '',
    ]);
    expect(row).toEqual({ tenant: '' });
  });
});

describe.each(SCHEMAS)('single-tenant mode (tenancy off) in schema %s', (schema) => {
  /** The outbox's tables in this schema. */
  const n = outboxNames(schema);
  let db: TestDatabase;
  let relayRole: TestRole;
  let appRole: TestRole;
  let app: TestApp;
  let worker: TestApp;

  beforeAll(async () => {
    db = await createTestDatabase([EFFECTS_TABLE_SQL], { schema });
    relayRole = await createLoginRole(db, 'outbox_relay', [EFFECTS_GRANT]);
    appRole = await createLoginRole(db, 'outbox_app');
    // Neither the app nor the relay is the owner, and the app sets no tenant: an unset setting means the
    // single tenant in the policies.
    app = await buildApp({ url: appRole.url, outbox: { schema, tenancy: 'single' } });
    worker = await buildApp({
      url: relayRole.url,
      providers: [TenantConsumers],
      outbox: { schema, tenancy: 'single' },
    });
    await worker.relay.heartbeat();
  });
  afterAll(async () => {
    await app?.close();
    await worker?.close();
    await db?.drop();
    await relayRole?.drop();
    await appRole?.drop();
  });

  it('enqueues without a tenant id or setting, delivers, and reports stats for the single tenant', async () => {
    const id = await app.dataSource.transaction((manager) =>
      app.outbox.enqueue(manager, { eventName: 'test.tenant.v1', payload: {} }),
    );
    await worker.relay.drain();
    expect(await db.sql(`select tenant_id, status from ${n.events} where id = $1`, [id])).toEqual([
      { tenant_id: SINGLE_TENANT_ID, status: 'published' },
    ]);
    const stats = await worker.app.get(OutboxAdminService).stats(SINGLE_TENANT_ID);
    expect(stats.events.published).toBe(1);
    expect(stats.consumers.steady.delivered).toBe(1);
    expect(stats.orphanedConsumers).toEqual([]);
  });
});
