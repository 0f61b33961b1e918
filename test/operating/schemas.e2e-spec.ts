import { Injectable, type Provider } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxModule,
  OutboxRelay,
  OutboxService,
  type OutboxEvent,
} from 'nestjs-pg-outbox';
import { outboxNames } from '../../libs/outbox/src/store/sql';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, migrateOutbox, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';

const TENANT = '5c4e0a00-0000-4000-8000-000000000001';
const EVENT = 'test.schema.v1';
/** The second app's schema; the first app keeps the default one. */
const BILLING = 'billing';
const inPublic = outboxNames();
const inBilling = outboxNames(BILLING);
/** Events each app enqueues. */
const EVENTS_PER_APP = 40;

/** The consumer both apps host, under the same name. */
@Injectable()
class Audit {
  readonly seen: string[] = [];
  @OnOutboxEvent(EVENT, { consumer: 'audit' })
  record(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }
}

/** A consumer only the billing app hosts: rows of it in public would mean a relay read the wrong registry. */
@Injectable()
class BillingOnly {
  readonly seen: string[] = [];
  @OnOutboxEvent(EVENT, { consumer: 'billing-only' })
  record(event: OutboxEvent): void {
    this.seen.push(event.eventId);
  }
}

describe('two apps in one database, each in its own schema', () => {
  let db: TestDatabase;
  const apps: TestApp[] = [];
  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateOutbox(db, BILLING);
  });
  afterEach(async () => {
    while (apps.length) await apps.pop()!.close();
  });
  afterAll(async () => {
    await db?.drop();
  });

  const start = async (schema: string | undefined, providers: Provider[], relay = {}): Promise<TestApp> => {
    const app = await buildApp({ url: db.url, providers, outbox: { schema, relay } });
    apps.push(app);
    return app;
  };
  const enqueue = (app: TestApp, n: number): Promise<string[]> =>
    app.dataSource.transaction((m) =>
      app.outbox.enqueueMany(
        m,
        Array.from({ length: n }, (_, i) => ({ tenantId: TENANT, eventName: EVENT, payload: { i } })),
      ),
    );
  const ids = async (table: string): Promise<string[]> =>
    (await db.sql<{ id: string }>(`select id from ${table} order by id`)).map((r) => r.id);

  it('each relay, both running, delivers only the events of its own schema, to the consumers of its own registry', async () => {
    const running = { enabled: true, pollIntervalMs: 100 };
    const main = await start(undefined, [Audit], running);
    const billing = await start(BILLING, [Audit, BillingOnly], running);
    const mainIds: string[] = [];
    const billingIds: string[] = [];
    // interleaved commits, the same tenant, event name and consumer name in both
    for (let i = 0; i < EVENTS_PER_APP; i += 10) {
      mainIds.push(...(await enqueue(main, 10)));
      billingIds.push(...(await enqueue(billing, 10)));
    }
    const published = async (table: string): Promise<boolean> =>
      (await db.sql<{ n: number }>(`select count(*)::int as n from ${table} where status <> 'published'`))[0]!
        .n === 0;
    await waitFor(async () => (await published(inPublic.events)) && (await published(inBilling.events)), {
      timeoutMs: 20_000,
      message: 'both schemas published',
    });
    await main.relay.stop();
    await billing.relay.stop();

    expect(main.app.get(Audit).seen.sort()).toEqual([...mainIds].sort());
    expect(billing.app.get(Audit).seen.sort()).toEqual([...billingIds].sort());
    expect(billing.app.get(BillingOnly).seen.sort()).toEqual([...billingIds].sort());
    expect(await ids(inPublic.events)).toEqual([...mainIds].sort());
    expect(await ids(inBilling.events)).toEqual([...billingIds].sort());
    const consumers = async (table: string) =>
      (await db.sql<{ c: string }>(`select distinct consumer_name as c from ${table} order by 1`)).map(
        (r) => r.c,
      );
    expect(await consumers(inPublic.deliveries)).toEqual(['audit']);
    expect(await consumers(inBilling.deliveries)).toEqual(['audit', 'billing-only']);
    const registry = async (table: string) =>
      (await db.sql<{ name: string }>(`select name from ${table} order by name`)).map((r) => r.name);
    expect(await registry(inPublic.consumers)).toEqual(['audit']);
    expect(await registry(inBilling.consumers)).toEqual(['audit', 'billing-only']);
  });

  it('keeps idempotency keys in its own schema: a free, a held and an expired key, one by one and many at once', async () => {
    const billing = await start(BILLING, []);
    // an event no consumer of these tests subscribes to, so the other tests' relays deliver none of them
    const keyed = (key: string, i: number) => ({
      tenantId: TENANT,
      eventName: 'test.schema.keyed.v1',
      payload: { i },
      dedupe: { key },
    });
    const one = (key: string, i: number) =>
      billing.dataSource.transaction((m) => billing.outbox.enqueue(m, keyed(key, i)));
    const first = await one('k1', 1);
    expect(first.outcome).toBe('written');
    expect(await one('k1', 2)).toEqual({ eventId: first.eventId, outcome: 'ignored' });
    const many = await billing.dataSource.transaction((m) =>
      billing.outbox.enqueueMany(m, [keyed('k1', 3), keyed('k2', 4)]),
    );
    expect(many.map((o) => o.outcome)).toEqual(['ignored', 'written']);
    await db.sql(`update ${inBilling.dedupeKeys} set expires_at = now() - interval '1 second'`);
    const again = await one('k1', 5);
    expect(again.outcome).toBe('written');
    const both = await billing.dataSource.transaction((m) =>
      billing.outbox.enqueueMany(m, [keyed('k2', 6), keyed('k3', 7)]),
    );
    expect(both.map((o) => o.outcome)).toEqual(['written', 'written']);
    expect(await db.sql(`select count(*)::int n from ${inPublic.dedupeKeys}`)).toEqual([{ n: 0 }]);
    expect(
      await db.sql(`select dedupe_key, event_id from ${inBilling.dedupeKeys} order by dedupe_key`),
    ).toEqual([
      { dedupe_key: 'k1', event_id: again.eventId },
      { dedupe_key: 'k2', event_id: both[0]!.eventId },
      { dedupe_key: 'k3', event_id: both[1]!.eventId },
    ]);
  });

  it("leaves the other schema's events alone when its own relay is the only one running", async () => {
    const main = await start(undefined, [Audit], { enabled: true, pollIntervalMs: 100 });
    const producer = await start(BILLING, [], { enabled: false });
    const [waiting] = await enqueue(producer, 1);
    // a round of the running relay after the commit: run one more of its own and let it finish
    await main.relay.runOnce();
    expect(main.app.get(Audit).seen).not.toContain(waiting);
    expect(await db.sql(`select status from ${inBilling.events} where id = $1`, [waiting])).toEqual([
      { status: 'pending' },
    ]);

    const worker = await start(BILLING, [Audit], { enabled: false });
    await worker.relay.drain();
    expect(worker.app.get(Audit).seen).toEqual([waiting]);
  });

  it("wakes only its own schema's relays: the NOTIFY goes on the schema's channel", async () => {
    const producer = await start(BILLING, [], { enabled: false, wakeUps: 'notify' });
    const listener = new Client({ connectionString: db.url });
    await listener.connect();
    try {
      const received: string[] = [];
      listener.on('notification', (n) => received.push(`${n.channel}:${n.payload ?? ''}`));
      await listener.query(`listen ${inPublic.wakeupChannel}`);
      await listener.query(`listen ${inBilling.wakeupChannel}`);
      await enqueue(producer, 1);
      await waitFor(() => received.length > 0, { timeoutMs: 5000, message: "billing's NOTIFY" });
      // A notification of the producer's on the default channel, sent at its commit, would be delivered before
      // this marker (one server: notifications arrive in commit order, whatever their channel).
      await db.sql(`select pg_notify($1, 'marker')`, [inPublic.wakeupChannel]);
      await waitFor(() => received.includes(`${inPublic.wakeupChannel}:marker`), {
        timeoutMs: 5000,
        message: 'the marker',
      });
      expect(received).toEqual([`outbox_wakeup_billing:${TENANT}`, 'outbox_wakeup:marker']);
    } finally {
      await listener.end();
    }
  });

  it('takes the schema from forRootAsync as from forRoot', async () => {
    const module = await Test.createTestingModule({
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url }),
        OutboxModule.forRootAsync({
          useFactory: async () => ({ schema: BILLING, relay: { enabled: false } }),
        }),
      ],
      providers: [Audit],
    }).compile();
    module.useLogger(false);
    await module.init();
    try {
      const outbox = module.get(OutboxService);
      const id = await module
        .get(DataSource)
        .transaction((m) => outbox.enqueue(m, { tenantId: TENANT, eventName: EVENT, payload: {} }));
      const count = async (table: string): Promise<number> =>
        (await db.sql<{ n: number }>(`select count(*)::int as n from ${table} where id = $1`, [id]))[0]!.n;
      expect([await count(inPublic.events), await count(inBilling.events)]).toEqual([0, 1]);
      const billingEvents = await ids(inBilling.events);
      await module.get(OutboxRelay).drain();
      // with whatever earlier tests left pending in billing, and nothing of public's
      const seen = module.get(Audit).seen;
      expect(seen).toContain(id);
      expect(seen.filter((e) => !billingEvents.includes(e))).toEqual([]);
    } finally {
      await module.close();
    }
  });

  it('refuses at boot a schema that is not a lower-case identifier, saying what it takes', async () => {
    const failed = start('Billing', []);
    await expect(failed).rejects.toThrow(OutboxConfigurationError);
    await expect(failed).rejects.toThrow(
      /option schema must be a lower-case PostgreSQL identifier.*"Billing"/,
    );
  });
});
