import { Injectable } from '@nestjs/common';
import { Pool } from 'pg';
import { OutboxConfigurationError } from 'nestjs-pg-outbox';
import {
  type OutboxTransport,
  type OutboxTransportBatch,
  type OutboxTransportOptions,
  type OutboxTransportOutcome,
} from 'nestjs-pg-outbox/brokers';
import { buildApp, type TestApp } from '../support/build-app';
import { createEmptyDatabase, createTestDatabase, type TestDatabase } from '../support/test-database';
import { truncateTables } from '../support/outbox-fixture';

const TENANT = '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d';
const FAST = { baseMs: 1, capMs: 60_000, jitter: 0 };

/**
 * A transport that writes each batch to another database in one transaction: the proof that a claimed batch in,
 * an outcome per delivery out, is enough for a real way out of the outbox. Idempotent on the event id, as a
 * receiver should be; counts its calls.
 */
class SecondDatabaseTransport implements OutboxTransport {
  readonly batches: { consumer: string; tenantId: string; size: number }[] = [];
  closed = 0;
  constructor(private readonly pool: Pool) {}

  async send(batch: OutboxTransportBatch): Promise<OutboxTransportOutcome[]> {
    this.batches.push({ consumer: batch.consumer, tenantId: batch.tenantId, size: batch.deliveries.length });
    const rows = batch.deliveries.map((d) => d.event);
    const inserted = await this.pool.query<{ event_id: string }>(
      `insert into received (event_id, tenant_id, event_name, aggregate_id, attempt, body)
       select * from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int[], $6::jsonb[])
       on conflict (event_id) do nothing
       returning event_id`,
      [
        rows.map((e) => e.eventId),
        rows.map((e) => e.tenantId),
        rows.map((e) => e.eventName),
        rows.map((e) => e.aggregateId),
        batch.deliveries.map((d) => d.attempt),
        rows.map((e) => JSON.stringify(e.data)),
      ],
    );
    const fresh = new Set(inserted.rows.map((r) => r.event_id));
    return rows.map((e) => ({ status: 'delivered', externalRunId: fresh.has(e.eventId) ? 'new' : 'seen' }));
  }

  close(): void {
    this.closed++;
  }
}

describe('the transport interface', () => {
  let db: TestDatabase;
  let target: TestDatabase;
  let pool: Pool;
  let t: TestApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    target = await createEmptyDatabase();
    await target.sql(`create table received (
      seq bigserial primary key, event_id uuid not null unique, tenant_id uuid not null, event_name text not null,
      aggregate_id text, attempt int not null, body jsonb not null)`);
    pool = new Pool({ connectionString: target.url, max: 4 });
  });
  afterAll(async () => {
    await pool?.end();
    await target?.drop();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateTables(db, 'event_outbox, outbox_deliveries, consumer_inbox, outbox_consumers cascade');
    await target.sql('truncate received');
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const start = async (
    transports: Partial<OutboxTransportOptions>[],
    extra: { providers?: Parameters<typeof buildApp>[0]['providers']; batchSize?: number } = {},
  ): Promise<TestApp> => {
    t = await buildApp({
      url: db.url,
      providers: extra.providers,
      outbox: {
        relay: { batchSize: extra.batchSize ?? 100 },
      },
      brokers: {
        transports: transports.map(
          (entry) =>
            ({ name: 'second-db', events: ['test.tx.*'], backoff: FAST, ...entry }) as OutboxTransportOptions,
        ),
      },
    });
    return t;
  };
  const enqueue = (app: TestApp, count: number, aggregates = count, eventName = 'test.tx.created.v1') =>
    app.dataSource.transaction(async (m) => {
      const ids: string[] = [];
      for (let i = 0; i < count; i++)
        ids.push(
          await app.outbox.enqueue(m, {
            tenantId: TENANT,
            eventName,
            payload: { n: i },
            aggregateType: 'thing',
            aggregateId: `a-${i % aggregates}`,
          }),
        );
      return ids;
    });
  const deliveries = (consumer = 'transport:second-db') =>
    db.sql<{
      event_id: string;
      status: string;
      attempt_count: number;
      error_code: string | null;
      last_error: string | null;
      external_run_id: string | null;
    }>(
      'select event_id, status, attempt_count, error_code, last_error, external_run_id from outbox_deliveries where consumer_name = $1',
      [consumer],
    );
  const makeRetriesDue = () =>
    db.sql(`update outbox_deliveries set next_attempt_at = now() where status in ('failed', 'pending')`);

  it('writes every event to the second database once, one call per claimed batch, and closes the transport at shutdown', async () => {
    const transport = new SecondDatabaseTransport(pool);
    const app = await start([{ transport }], { batchSize: 50 });
    const ids = await enqueue(app, 120);
    const round = await app.relay.drain();
    expect(round).toMatchObject({ succeeded: 120, failed: 0, dead: 0 });

    const received = await target.sql<{ event_id: string; tenant_id: string; body: { n: number } }>(
      'select event_id, tenant_id, body from received order by seq',
    );
    expect(received.map((r) => r.event_id).sort()).toEqual([...ids].sort());
    expect(new Set(received.map((r) => r.tenant_id))).toEqual(new Set([TENANT]));
    // batches of at most relay.batchSize, each one call with the consumer's name and the tenant
    expect(transport.batches.length).toBeGreaterThanOrEqual(3);
    expect(transport.batches.every((b) => b.size <= 50 && b.consumer === 'transport:second-db')).toBe(true);
    expect(transport.batches.reduce((n, b) => n + b.size, 0)).toBe(120);
    expect(new Set(transport.batches.map((b) => b.tenantId))).toEqual(new Set([TENANT]));
    const rows = await deliveries();
    expect(rows).toHaveLength(120);
    expect(rows.every((r) => r.status === 'delivered' && r.external_run_id === 'new')).toBe(true);
    const [registered] = await db.sql('select name, kind, event_patterns from outbox_consumers');
    expect(registered).toEqual({
      name: 'transport:second-db',
      kind: 'transport',
      event_patterns: ['test.tx.*'],
    });

    expect(transport.closed).toBe(0);
    await t!.close();
    t = undefined;
    expect(transport.closed).toBe(1);
  });

  it('records each outcome as the transport said: failed is retried, dead stays dead, deferred spends no attempt', async () => {
    const said: OutboxTransportOutcome['status'][] = [];
    const transport: OutboxTransport = {
      send: async (batch) =>
        batch.deliveries.map((d): OutboxTransportOutcome => {
          const n = (d.event.data as { n: number }).n;
          const status = n === 0 ? (d.attempt === 1 ? 'failed' : 'delivered') : n === 1 ? 'dead' : 'deferred';
          said.push(status);
          if (status === 'delivered') return { status };
          if (status === 'deferred')
            return { status, errorCode: 'remoteBusy', error: 'try later', retryAfterMs: 60_000 };
          return { status, errorCode: `remote${status}`, error: `it was ${status}` };
        }),
    };
    const app = await start([{ transport }]);
    const [first, second, third] = await enqueue(app, 3);
    expect(await app.relay.runOnce()).toMatchObject({ failed: 2, dead: 1 });
    const byId = async () => new Map((await deliveries()).map((r) => [r.event_id, r]));
    let rows = await byId();
    expect(rows.get(first!)).toMatchObject({
      status: 'failed',
      attempt_count: 1,
      error_code: 'remotefailed',
    });
    expect(rows.get(second!)).toMatchObject({ status: 'dead', attempt_count: 1, error_code: 'remotedead' });
    expect(rows.get(third!)).toMatchObject({ status: 'pending', attempt_count: 0, error_code: 'remoteBusy' });
    await makeRetriesDue();
    await app.relay.drain();
    rows = await byId();
    expect(rows.get(first!)).toMatchObject({ status: 'delivered', attempt_count: 2 });
    expect(rows.get(second!)).toMatchObject({ status: 'dead', attempt_count: 1 });
    expect(rows.get(third!)).toMatchObject({ status: 'pending', attempt_count: 0 });
  });

  it('fails a batch whose send outlives timeoutMs with `timeout`, and aborts its signal', async () => {
    let aborted: unknown = null;
    const transport: OutboxTransport = {
      send: (batch) =>
        new Promise((resolve) => {
          batch.signal.addEventListener('abort', () => {
            aborted = batch.signal.reason;
            // answering late: ignored, the outcome is already `timeout`
            resolve(batch.deliveries.map(() => ({ status: 'delivered' })));
          });
        }),
    };
    const app = await start([{ transport, timeoutMs: 200 }]);
    const [id] = await enqueue(app, 1);
    expect(await app.relay.runOnce()).toMatchObject({ failed: 1, succeeded: 0 });
    expect(aborted).toBeInstanceOf(Error);
    const [row] = await deliveries();
    expect(row).toMatchObject({ event_id: id, status: 'failed', error_code: 'timeout' });
    expect(row!.last_error).toContain('within 200 ms');
  });

  it('fails with transportError a rejection, a missing outcome and a malformed one, each saying what was wrong', async () => {
    const transport: OutboxTransport = {
      send: async (batch) => {
        const n = (batch.deliveries[0]!.event.data as { n: number }).n;
        if (batch.deliveries.length === 1 && n === 0) throw new Error('kafka said no');
        return [{ status: 'delivered' }, { status: 'sent' } as never];
      },
    };
    const app = await start([{ transport }]);
    await enqueue(app, 1);
    await app.relay.runOnce();
    const rows = await deliveries();
    expect(rows[0]).toMatchObject({ status: 'failed', error_code: 'transportError' });
    expect(rows[0]!.last_error).toContain('kafka said no');

    await truncateTables(db, 'event_outbox, outbox_deliveries cascade');
    await enqueue(app, 3);
    await app.relay.runOnce();
    const byN = await db.sql<{ n: number; status: string; error_code: string | null; last_error: string }>(
      `select (e.payload->>'n')::int as n, d.status, d.error_code, d.last_error
         from outbox_deliveries d join event_outbox e on e.id = d.event_id`,
    );
    byN.sort((a, b) => a.n - b.n);
    expect(byN.map((r) => [r.status, r.error_code])).toEqual([
      ['delivered', null],
      ['failed', 'transportError'],
      ['failed', 'transportError'],
    ]);
    expect(byN[1]!.last_error).toContain('has status "sent"');
    expect(byN[2]!.last_error).toContain('is missing: send must return one outcome per delivery');
  });

  it('takes a transport class from the app providers, with its dependencies injected', async () => {
    @Injectable()
    class TargetPool {
      readonly pool = pool;
    }
    @Injectable()
    class InjectedTransport extends SecondDatabaseTransport {
      constructor(target: TargetPool) {
        super(target.pool);
      }
    }
    const app = await start([{ transport: InjectedTransport }], {
      providers: [TargetPool, InjectedTransport],
    });
    const provided = app.app.get(InjectedTransport);
    await enqueue(app, 2);
    await app.relay.drain();
    expect(provided.batches.reduce((n, b) => n + b.size, 0)).toBe(2);
    expect(await target.sql('select count(*)::int as n from received')).toEqual([{ n: 2 }]);
  });

  it('hands out an ordered transport one event per aggregate at a time, in commit order', async () => {
    const transport = new SecondDatabaseTransport(pool);
    const app = await start([{ transport, ordered: true }], { batchSize: 100 });
    await enqueue(app, 60, 4);
    await app.relay.drain();
    const received = await target.sql<{ aggregate_id: string; body: { n: number } }>(
      'select aggregate_id, body from received order by seq',
    );
    expect(received).toHaveLength(60);
    for (const aggregate of ['a-0', 'a-1', 'a-2', 'a-3']) {
      const ns = received.filter((r) => r.aggregate_id === aggregate).map((r) => r.body.n);
      expect(ns).toEqual([...ns].sort((a, b) => a - b));
      expect(ns).toHaveLength(15);
    }
    // one in flight per aggregate: no batch held two events of one aggregate
    expect(Math.max(...transport.batches.map((b) => b.size))).toBeLessThanOrEqual(4);
  });

  it('lists every problem of the transports option in one boot error', async () => {
    class NoSend {}
    const failure = start([
      { name: 'bad name!', transport: { send: async () => [] } },
      { name: 'twice', events: [], transport: { send: async () => [] } },
      { name: 'twice', transport: NoSend as never },
      { name: 'plain', transport: { deliver: () => null } as never, timeoutMs: 10 ** 9 },
    ]);
    const error = (await failure.catch((e: unknown) => e)) as OutboxConfigurationError;
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    expect(error.problems).toEqual([
      expect.stringContaining('transports[0] ("bad name!").name'),
      expect.stringContaining('transports[1] ("twice").events'),
      expect.stringContaining('transports[1] and transports[2] are both named "twice"'),
      expect.stringContaining('the class NoSend has no send method'),
      expect.stringContaining('transports[3] ("plain").timeoutMs'),
      expect.stringContaining('transports[3] ("plain").transport'),
    ]);
  });
});
