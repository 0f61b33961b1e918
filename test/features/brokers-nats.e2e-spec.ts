import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { type OutboxNatsBrokerOptions } from 'nestjs-pg-outbox/brokers';
import { OUTBOX_MESSAGE_HEADERS } from 'nestjs-pg-outbox/inbox';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { createNatsServer, createTcpGate, outOfOrder, type NatsServer } from '../support/broker-servers';
import { uniqueName } from '../support/brokers';
import { startChildRelay, type ChildRelay } from '../support/child-relay';
import { waitFor } from '../support/wait-for';
import { busiestWindow, rateLogQuiet } from '../support/rate-windows';
import { deliveredCount, deliveryCounts, enqueueOrders, forwardTenThousand } from '../support/forwarding';
import { truncateTables } from '../support/outbox-fixture';

const TENANT = '9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a';
const OTHER_TENANT = '1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d';
const FAST = { baseMs: 10, capMs: 200, jitter: 0 };

/** A message as read back from a stream. */
interface Stored {
  seq: number;
  /** When the stream stored it, by the server's clock (ms). */
  storedAt: number;
  msgId: string;
  headers: Record<string, string>;
  body: { eventId: string; tenantId: string; aggregate: { id: string } | null; data: { n: number } };
}

describe('the NATS JetStream forwarder', () => {
  let db: TestDatabase;
  let server: NatsServer;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let t: TestApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    server = await createNatsServer();
    nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await server?.remove();
    await db?.drop();
  });
  beforeEach(async () => {
    await truncateTables(db, 'event_outbox, outbox_deliveries, consumer_inbox, outbox_consumers cascade');
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** A stream of its own that captures `<prefix>.>`, with a two-minute duplicate window. */
  const stream = async (label: string): Promise<{ name: string; prefix: string }> => {
    const name = uniqueName(`outbox_${label}`).replace(/-/g, '_');
    const prefix = name.replace(/_/g, '-');
    await jsm.streams.add({ name, subjects: [`${prefix}.>`], duplicate_window: 120_000 * 1_000_000 });
    return { name, prefix };
  };
  const start = async (
    brokers: Partial<OutboxNatsBrokerOptions>[],
    relay: Record<string, unknown> = {},
  ): Promise<TestApp> => {
    t = await buildApp({
      url: db.url,
      outbox: {
        relay: { batchSize: 100, ...relay },
        maxAttempts: 20,
        backoff: FAST,
      },
      brokers: {
        brokers: brokers.map(
          (b) =>
            ({
              name: 'nats',
              type: 'nats',
              servers: server.url,
              events: ['test.nats.*'],
              timeoutMs: 5000,
              ...b,
            }) as OutboxNatsBrokerOptions,
        ),
      },
    });
    return t;
  };
  const ORDERS = { tenantId: TENANT, eventName: 'test.nats.created.v1', correlationId: 'corr-9' };
  const enqueue = (app: TestApp, count: number, aggregates: number) =>
    enqueueOrders(app, ORDERS, count, aggregates);
  const messageCount = async (name: string): Promise<number> => (await jsm.streams.info(name)).state.messages;
  /** Every message of the stream, in stream order (an ordered consumer). */
  const readStream = async (name: string): Promise<Stored[]> => {
    const count = await messageCount(name);
    const consumer = await jetstream(nc).consumers.get(name);
    const stored: Stored[] = [];
    const messages = await consumer.consume({ max_messages: 1000 });
    for await (const m of messages) {
      const headers: Record<string, string> = {};
      for (const key of m.headers?.keys() ?? []) headers[key] = m.headers!.get(key);
      stored.push({
        seq: m.seq,
        storedAt: Number(m.info.timestampNanos) / 1e6,
        msgId: headers['Nats-Msg-Id'] ?? '',
        headers,
        body: m.json(),
      });
      if (stored.length >= count) break;
    }
    return stored;
  };
  const deliveries = (consumer = 'broker:nats') => deliveryCounts(db, consumer);

  it.each([
    ['unordered', false],
    ['ordered', true],
  ] as const)(
    'forwards 10,000 events (%s): the stream holds each once, in per-aggregate commit order when ordered',
    async (label, ordered) => {
      const { name, prefix } = await stream(label);
      const app = await start([{ stream: name, subject: (e) => `${prefix}.${e.eventName}`, ordered }]);
      const { ids, totals, seconds } = await forwardTenThousand(app, ORDERS);
      expect(totals).toEqual({ succeeded: 10_000, failed: 0, dead: 0 });
      expect(await messageCount(name)).toBe(10_000);
      const stored = await readStream(name);
      expect(new Set(stored.map((m) => m.msgId)).size).toBe(10_000);
      expect(stored.map((m) => m.msgId).sort()).toEqual([...ids].sort());
      expect(stored.every((m) => m.msgId === m.body.eventId)).toBe(true);
      if (ordered) expect(outOfOrder(stored)).toEqual([]);
      process.stdout.write(`JetStream, ${label}: 10,000 events forwarded in ${seconds.toFixed(1)} s\n`);
      await jsm.streams.delete(name);
    },
    180_000,
  );

  it('a per-tenant rate limit holds what the stream stores per window for each tenant; none lost, none charged', async () => {
    const { name, prefix } = await stream('rated');
    const limit = { limit: 10, intervalMs: 1000, perTenant: true };
    const batchSize = 5;
    // polls every 50 ms (room freed by the window sliding is found within that), one batch at a time
    const app = await start(
      [{ stream: name, subject: (e) => `${prefix}.${e.eventName}`, rateLimit: limit }],
      {
        enabled: true,
        pollIntervalMs: 50,
        batchSize,
        concurrency: 1,
      },
    );
    // the forwarder's first batch waits for its connection: warmed up, and the rate log left to empty first
    const warm = await enqueue(app, 2, 2);
    await waitFor(async () => (await deliveredCount(db, 'broker:nats')) === warm.length, {
      timeoutMs: 20_000,
      message: 'the warm-up messages',
    });
    await rateLogQuiet(db, 'broker:nats', limit.intervalMs);
    await truncateTables(db, 'event_outbox, outbox_deliveries');

    const tenants = [TENANT, OTHER_TENANT];
    const ids = (
      await Promise.all(tenants.map((tenantId) => enqueueOrders(app, { ...ORDERS, tenantId }, 30, 3)))
    ).flat();
    await waitFor(async () => (await deliveredCount(db, 'broker:nats')) === ids.length, {
      timeoutMs: 30_000,
      message: '60 messages forwarded',
    });
    const stored = (await readStream(name)).filter((m) => !warm.includes(m.msgId));
    expect(stored.map((m) => m.msgId).sort()).toEqual([...ids].sort());
    expect(await deliveries()).toEqual([
      expect.objectContaining({ status: 'delivered', n: 60, attempts: 1 }),
    ]);
    const busiest = tenants.map((tenantId) =>
      busiestWindow(
        stored.filter((m) => m.body.tenantId === tenantId).map((m) => m.storedAt),
        limit.intervalMs,
      ),
    );
    process.stdout.write(
      `JetStream, 10 / 1 s per tenant: busiest window stored per tenant ${busiest.join(', ')}\n`,
    );
    // the limit holds on claims, per tenant; a message is stored its publish time later: at most a claim more
    for (const most of busiest) expect(most).toBeLessThanOrEqual(limit.limit + batchSize);
    // and each tenant reaches it: within 10 % of 2 × 10 in its first two intervals
    for (const tenantId of tenants) {
      const times = stored.filter((m) => m.body.tenantId === tenantId).map((m) => m.storedAt);
      const inTwo = times.filter((at) => at < Math.min(...times) + 2 * limit.intervalMs).length;
      expect(inTwo).toBeGreaterThanOrEqual(0.9 * 2 * limit.limit);
      expect(inTwo).toBeLessThanOrEqual(2 * limit.limit + batchSize);
    }
    // each tenant has its own room: together, more than one tenant's limit in a window
    expect(
      busiestWindow(
        stored.map((m) => m.storedAt),
        limit.intervalMs,
      ),
    ).toBeGreaterThan(limit.limit + batchSize);
    await jsm.streams.delete(name);
  }, 90_000);

  it('publishes with Nats-Msg-Id = event id, the outbox headers and the webhook envelope, and keeps the ack', async () => {
    const { name, prefix } = await stream('headers');
    const app = await start([{ stream: name, subject: (e) => `${prefix}.${e.eventName}` }]);
    const [id] = await enqueue(app, 1, 1);
    await app.relay.drain();
    const [message] = await readStream(name);
    expect(message!.msgId).toBe(id);
    expect(message!.headers).toMatchObject({
      [OUTBOX_MESSAGE_HEADERS.event]: 'test.nats.created.v1',
      [OUTBOX_MESSAGE_HEADERS.tenant]: TENANT,
      [OUTBOX_MESSAGE_HEADERS.aggregate]: 'order:o-0',
      [OUTBOX_MESSAGE_HEADERS.correlationId]: 'corr-9',
      [OUTBOX_MESSAGE_HEADERS.schemaVersion]: '1',
      [OUTBOX_MESSAGE_HEADERS.attempt]: '1',
    });
    expect(message!.body).toEqual({
      eventId: id,
      eventName: 'test.nats.created.v1',
      tenantId: TENANT,
      occurredAt: expect.stringMatching(/Z$/),
      correlationId: 'corr-9',
      aggregate: { type: 'order', id: 'o-0' },
      schemaVersion: 1,
      data: { n: 0 },
    });
    const [row] = await db.sql('select status, external_run_id from outbox_deliveries');
    expect(row).toEqual({ status: 'delivered', external_run_id: `${name}:1` });
    await jsm.streams.delete(name);
  });

  it('records a re-publish after a lost outcome as delivered, and the duplicate window keeps one message', async () => {
    const { name, prefix } = await stream('dup');
    const app = await start([{ stream: name, subject: (e) => `${prefix}.${e.eventName}` }]);
    const [id] = await enqueue(app, 1, 1);
    // what a relay that published and then died before recording the outcome leaves behind
    await jetstream(nc).publish(`${prefix}.test.nats.created.v1`, '{}', { msgID: id });
    await app.relay.drain();
    const [row] = await db.sql('select status, external_run_id from outbox_deliveries');
    expect(row).toEqual({ status: 'delivered', external_run_id: `${name}:1 duplicate` });
    expect(await messageCount(name)).toBe(1);
    await jsm.streams.delete(name);
  });

  it('fails with unroutable a subject no stream captures, and one another stream than the expected captures', async () => {
    const { name, prefix } = await stream('route');
    const other = await stream('other');
    const app = await start([
      { name: 'nowhere', subject: () => `nowhere-${prefix}.x` },
      { name: 'wrong', stream: name, subject: () => `${other.prefix}.x` },
    ]);
    await enqueue(app, 2, 2);
    await app.relay.runOnce();
    const [nowhere] = await deliveries('broker:nowhere');
    expect(nowhere).toMatchObject({ status: 'failed', n: 2, error_code: 'unroutable' });
    expect(nowhere!.last_error).toContain('no stream captures subject');
    const [wrong] = await deliveries('broker:wrong');
    expect(wrong).toMatchObject({ status: 'failed', n: 2, error_code: 'unroutable' });
    expect(wrong!.last_error).toContain(`is not captured by stream "${name}"`);
    expect(await messageCount(other.name)).toBe(0);
    await jsm.streams.delete(name);
    await jsm.streams.delete(other.name);
  });

  it('gives deliveries back while the server is down at start (no attempt spent), and forwards them once it is up', async () => {
    const later = await createNatsServer({ started: false });
    try {
      const app = await start([{ servers: later.url, reconnect: { baseMs: 20, capMs: 100 } }]);
      const ids = await enqueue(app, 100, 10);
      await app.relay.runOnce();
      const [waiting] = await deliveries();
      expect(waiting).toMatchObject({
        status: 'pending',
        n: 100,
        attempts: 0,
        error_code: 'brokerUnavailable',
      });
      await later.start();
      const own = await connect({ servers: later.url });
      try {
        const manager = await jetstreamManager(own);
        await manager.streams.add({ name: 'later', subjects: ['test.nats.>'] });
        await db.sql(`update outbox_deliveries set next_attempt_at = now()`);
        await waitFor(
          async () => {
            await app.relay.drain();
            return (await deliveries()).find((d) => d.status === 'delivered' && d.n === 100);
          },
          { timeoutMs: 20_000, message: 'every delivery forwarded once the server is up' },
        );
        expect((await manager.streams.info('later')).state.messages).toBe(ids.length);
      } finally {
        await own.close();
      }
    } finally {
      await t?.close();
      t = undefined;
      await later.remove();
    }
  });

  it.each([
    ['the server is killed (SIGKILL) and restarted', 'restart'],
    ['the network cuts the connection after publishes reached the server', 'network'],
  ] as const)(
    'loses nothing when %s mid-stream; the duplicate window drops the re-publishes',
    async (_label, how) => {
      const { name, prefix } = await stream(how);
      const total = 5000;
      let relay: ChildRelay | null = null;
      const gate = await createTcpGate({ host: '127.0.0.1', port: server.port });
      await gate.open();
      try {
        const app = await start([{ stream: name }]);
        const ids = await enqueue(app, total, 50);
        await t!.close();
        t = undefined;
        relay = await startChildRelay(
          {
            DATABASE_URL: db.url,
            SUBJECT_PREFIX: `${prefix}.`,
            BROKERS: JSON.stringify([
              {
                name: 'nats',
                type: 'nats',
                servers: `nats://127.0.0.1:${gate.port}`,
                stream: name,
                events: ['test.nats.*'],
                timeoutMs: 2000,
                reconnect: { baseMs: 20, capMs: 200 },
              },
            ]),
          },
          { script: join(__dirname, '..', 'support', 'broker-relay-child.ts') },
        );
        await waitFor(async () => (await messageCount(name)) >= total / 5, {
          timeoutMs: 60_000,
          message: 'a fifth of the events forwarded',
        });
        if (how === 'restart') {
          await server.stop('SIGKILL');
          await server.start();
        } else {
          gate.cutAfterNextWrite();
        }
        await waitFor(async () => (await deliveredCount(db, 'broker:nats')) === total, {
          timeoutMs: 90_000,
          message: 'every delivery recorded as delivered',
        });
        const stored = await readStream(name);
        expect(stored).toHaveLength(total);
        expect(stored.map((m) => m.msgId).sort()).toEqual([...ids].sort());
        const [counts] = await db.sql<{ retried: number; duplicates: number }>(
          `select count(*) filter (where attempt_count > 1)::int as retried,
                count(*) filter (where external_run_id like '% duplicate')::int as duplicates
           from outbox_deliveries where consumer_name = 'broker:nats'`,
        );
        // a cut after publishes reached the server: their acks were lost, they went again, and the window dropped them
        if (how === 'network') expect(counts!.duplicates).toBeGreaterThan(0);
        process.stdout.write(
          `JetStream, ${how} mid-stream: ${total} events, ${stored.length} messages in the stream, ` +
            `${counts!.retried} deliveries retried, ${counts!.duplicates} re-publishes dropped by the duplicate window\n`,
        );
      } finally {
        await relay?.kill('SIGTERM');
        await gate.close();
        await jsm.streams.delete(name).catch(() => undefined);
      }
    },
  );
});
