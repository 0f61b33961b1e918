import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent, type OutboxHandlerContext } from 'nestjs-pg-outbox';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../tools/embedded-postgres';
import { outboxMigrations } from 'nestjs-pg-outbox';
import { DataSource } from 'typeorm';
import { buildApp, type TestApp } from '../support/build-app';
import type { TestDatabase } from '../support/test-database';
import { FAULT_EFFECTS_SQL, recordFaultEffect } from './support/fault-consumers';
import { pace } from './support/fault-fleet';
import { checkHistory, timeToQuiet } from './support/history';

const TENANT = 'd0000000-0000-4000-8000-00000000000d';

@Injectable()
class RestartConsumers {
  @OnOutboxEvent('fault.order.v1', {
    consumer: 'fx-writer',
    maxAttempts: 100,
    backoff: { baseMs: 50, capMs: 500, jitter: 0.5 },
  })
  writer(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordFaultEffect(event, context);
  }

  @OnOutboxEvent('fault.order.v1', {
    consumer: 'fx-audit',
    maxAttempts: 100,
    backoff: { baseMs: 50, capMs: 500, jitter: 0.5 },
  })
  audit(event: OutboxEvent, context: OutboxHandlerContext): Promise<void> {
    return recordFaultEffect(event, context);
  }
}

/**
 * PostgreSQL is restarted (fast shutdown, then start) twice while a producer enqueues and the relay drains. The
 * test owns a throwaway cluster for this, whatever DATABASE_URL says.
 */
describe('fault: PostgreSQL restarted while enqueueing and draining', () => {
  let server: EmbeddedPostgres;
  let db: TestDatabase;
  let app: TestApp;
  beforeAll(async () => {
    server = await startEmbeddedPostgres();
    const migrator = new DataSource({ type: 'postgres', url: server.url, migrations: outboxMigrations });
    await migrator.initialize();
    await migrator.runMigrations();
    await migrator.query(FAULT_EFFECTS_SQL);
    await migrator.query('create table fault_orders (key text primary key)');
    await migrator.destroy();
    db = {
      url: server.url,
      name: 'postgres',
      sql: async <T>(text: string, values?: unknown[]) => {
        const client = new Client({ connectionString: server.url });
        await client.connect();
        try {
          return (await client.query(text, values)).rows as T[];
        } finally {
          await client.end();
        }
      },
      drop: () => server.stop(),
    };
  });
  afterAll(async () => {
    await app?.close().catch(() => undefined);
    await server?.stop();
  });

  it('surfaces failed enqueue transactions to the caller, delivers every committed event once, and reconnects by itself', async () => {
    app = await buildApp({
      url: server.url,
      providers: [RestartConsumers],
      outbox: { handlerTimeoutMs: 1000, relay: { enabled: true, pollIntervalMs: 100, leaseMs: 3000 } },
    });
    const committed: string[] = [];
    const refused: string[] = [];
    let producing = true;
    const producer = (async () => {
      for (let n = 0; producing; n++) {
        const key = `order-${n}`;
        try {
          await app.dataSource.transaction(async (manager) => {
            await manager.query('insert into fault_orders (key) values ($1)', [key]);
            await app.outbox.enqueue(manager, {
              tenantId: TENANT,
              eventName: 'fault.order.v1',
              payload: { key },
            });
          });
          committed.push(key);
        } catch {
          refused.push(key);
          await pace(20);
        }
      }
    })();
    await pace(1500);
    await server.restart('fast');
    await pace(1500);
    await server.restart('fast');
    await pace(1500);
    producing = false;
    await producer;
    const recoveryMs = await timeToQuiet(db, 60_000);

    // Atomicity: an event exists exactly when its business row does, whatever the caller was told.
    const [mismatch] = await db.sql<{ n: number }>(
      `select count(*)::int n from fault_orders o full join event_outbox e on e.payload->>'key' = o.key where o.key is null or e.id is null`,
    );
    // Every transaction the caller saw commit is there; a refused one may have committed (the connection died
    // after COMMIT reached the server) — then it is delivered too, never half-written.
    const [missing] = await db.sql<{ n: number }>(
      `select count(*)::int n from unnest($1::text[]) k where not exists (select 1 from fault_orders o where o.key = k)`,
      [committed],
    );
    const report = await checkHistory(db, {
      scenario: 'PostgreSQL fast restart x2 mid-enqueue and mid-drain',
      table: 'fault_effects',
      consumers: ['fx-writer', 'fx-audit'],
      faults: 2,
      recoveryMs,
    });
    expect(refused.length).toBeGreaterThan(0);
    expect(committed.length).toBeGreaterThan(100);
    expect(mismatch!.n).toBe(0);
    expect(missing!.n).toBe(0);
    expect(report).toMatchObject({ lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
    // The relay reconnected by itself: something enqueued after the restarts is delivered too.
    await app.dataSource.transaction((m) =>
      app.outbox.enqueue(m, { tenantId: TENANT, eventName: 'fault.order.v1', payload: { key: 'after' } }),
    );
    await timeToQuiet(db, 10_000);
  });
});
