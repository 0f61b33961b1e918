import { join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { BROKER_HEADERS, type OutboxNatsBrokerOptions } from 'nestjs-pg-outbox';
import { buildApp, type TestApp } from './support/build-app';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { createNatsServer, outOfOrder, uniqueName, type NatsServer } from './support/brokers';
import { startChildRelay, type ChildRelay } from './support/child-relay';
import { waitFor } from './support/wait-for';

const TENANT = '9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a';
const FAST = { baseMs: 10, capMs: 200, jitter: 0 };

/** A message as read back from a stream. */
interface Stored {
  seq: number;
  msgId: string;
  headers: Record<string, string>;
  body: { eventId: string; aggregate: { id: string } | null; data: { n: number } };
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
    await db.sql('truncate event_outbox, outbox_deliveries, consumer_inbox, outbox_consumers cascade');
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
  const start = async (brokers: Partial<OutboxNatsBrokerOptions>[]): Promise<TestApp> => {
    t = await buildApp({
      url: db.url,
      outbox: {
        relay: { batchSize: 100 },
        maxAttempts: 20,
        backoff: FAST,
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
  /** `count` events in commits of 1,000, payload `n` from `first` on, spread round-robin over `aggregates`. */
  const enqueue = async (app: TestApp, count: number, aggregates: number, first = 0): Promise<string[]> => {
    const ids: string[] = [];
    for (let from = first; from < first + count; from += 1000) {
      const events = Array.from({ length: Math.min(1000, first + count - from) }, (_, i) => ({
        tenantId: TENANT,
        eventName: 'test.nats.created.v1',
        payload: { n: from + i },
        aggregateType: 'order',
        aggregateId: `o-${(from + i) % aggregates}`,
        correlationId: 'corr-9',
      }));
      ids.push(...(await app.dataSource.transaction((m) => app.outbox.enqueueMany(m, events))));
    }
    return ids;
  };
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
      stored.push({ seq: m.seq, msgId: headers['Nats-Msg-Id'] ?? '', headers, body: m.json() });
      if (stored.length >= count) break;
    }
    return stored;
  };
  const deliveries = (consumer = 'broker:nats') =>
    db.sql<{
      status: string;
      n: number;
      attempts: number;
      error_code: string | null;
      last_error: string | null;
    }>(
      `select status, count(*)::int as n, max(attempt_count)::int as attempts, max(error_code) as error_code,
              max(last_error) as last_error
         from outbox_deliveries where consumer_name = $1 group by status`,
      [consumer],
    );

  it.each([
    ['unordered', false],
    ['ordered', true],
  ] as const)(
    'forwards 10,000 events (%s): the stream holds each once, in per-aggregate commit order when ordered',
    async (label, ordered) => {
      const { name, prefix } = await stream(label);
      const app = await start([{ stream: name, subject: (e) => `${prefix}.${e.eventName}`, ordered }]);
      // in ten commits of 1,000, each forwarded before the next (as for RabbitMQ)
      const ids: string[] = [];
      const totals = { succeeded: 0, failed: 0, dead: 0 };
      const began = performance.now();
      for (let chunk = 0; chunk < 10; chunk++) {
        ids.push(...(await enqueue(app, 1000, 100, chunk * 1000)));
        const round = await app.relay.drain();
        for (const key of ['succeeded', 'failed', 'dead'] as const) totals[key] += round[key];
      }
      const seconds = (performance.now() - began) / 1000;
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

  it('publishes with Nats-Msg-Id = event id, the outbox headers and the webhook envelope, and keeps the ack', async () => {
    const { name, prefix } = await stream('headers');
    const app = await start([{ stream: name, subject: (e) => `${prefix}.${e.eventName}` }]);
    const [id] = await enqueue(app, 1, 1);
    await app.relay.drain();
    const [message] = await readStream(name);
    expect(message!.msgId).toBe(id);
    expect(message!.headers).toMatchObject({
      [BROKER_HEADERS.eventName]: 'test.nats.created.v1',
      [BROKER_HEADERS.tenant]: TENANT,
      [BROKER_HEADERS.aggregate]: 'order:o-0',
      [BROKER_HEADERS.correlationId]: 'corr-9',
      [BROKER_HEADERS.schemaVersion]: '1',
      [BROKER_HEADERS.attempt]: '1',
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

  it('loses nothing when the server is killed and restarted mid-stream; the duplicate window drops the re-publishes', async () => {
    const { name, prefix } = await stream('restart');
    const total = 5000;
    let relay: ChildRelay | null = null;
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
              servers: server.url,
              stream: name,
              events: ['test.nats.*'],
              timeoutMs: 2000,
              reconnect: { baseMs: 20, capMs: 200 },
            },
          ]),
        },
        { script: join(__dirname, 'support', 'broker-relay-child.ts') },
      );
      await waitFor(async () => (await messageCount(name)) >= total / 5, {
        timeoutMs: 60_000,
        message: 'a fifth of the events forwarded',
      });
      await server.stop('SIGKILL');
      await server.start();
      await waitFor(
        async () =>
          (
            await db.sql<{ n: number }>(
              `select count(*)::int as n from outbox_deliveries where consumer_name = 'broker:nats' and status = 'delivered'`,
            )
          )[0]!.n === total,
        { timeoutMs: 90_000, message: 'every delivery recorded as delivered' },
      );
      const stored = await readStream(name);
      expect(stored).toHaveLength(total);
      expect(stored.map((m) => m.msgId).sort()).toEqual([...ids].sort());
      const [counts] = await db.sql<{ retried: number; duplicates: number }>(
        `select count(*) filter (where attempt_count > 1)::int as retried,
                count(*) filter (where external_run_id like '% duplicate')::int as duplicates
           from outbox_deliveries where consumer_name = 'broker:nats'`,
      );
      process.stdout.write(
        `JetStream, server killed mid-stream: ${total} events, ${stored.length} messages in the stream, ` +
          `${counts!.retried} deliveries retried, ${counts!.duplicates} re-publishes dropped by the duplicate window\n`,
      );
    } finally {
      await relay?.kill('SIGTERM');
      await jsm.streams.delete(name).catch(() => undefined);
    }
  });
});
