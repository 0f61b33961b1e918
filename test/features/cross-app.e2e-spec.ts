import { join } from 'node:path';
import * as amqp from 'amqplib';
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import type { OutboxBrokerOptions } from 'nestjs-pg-outbox/brokers';
import { buildApp, type TestApp } from '../support/build-app';
import {
  createNatsServer,
  createRabbitVhost,
  type NatsServer,
  type RabbitVhost,
} from '../support/broker-servers';
import { uniqueName } from '../support/brokers';
import { startChildRelay, type ChildRelay } from '../support/child-relay';
import { enqueueOrders } from '../support/forwarding';
import { INBOX_EFFECTS_SQL, TENANT_A } from '../support/inbox-effects';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait-for';

const EVENTS = 2000;
/** Messages app B acknowledges before its acknowledgements start getting lost, and then it is killed. */
const ACKED_BEFORE_KILL = 500;
/** Messages in flight at app B at most (its prefetch / the JetStream consumer's max_ack_pending). */
const IN_FLIGHT = 10;
const ORDERS = { tenantId: TENANT_A, eventName: 'test.cross.created.v1', correlationId: 'corr-x' };
const CHILD = join(__dirname, '..', 'support', 'inbox-consumer-child.ts');

/** A broker of the test's own between app A's forwarder and app B's inbox. */
interface Route {
  /** App A's forwarder, an entry of OutboxBrokersModule's `brokers` option. */
  broker: OutboxBrokerOptions;
  /** App B's environment (see inbox-consumer-child.ts). */
  consumerEnv: Record<string, string>;
  close(): Promise<void>;
}

/** A vhost of the test's own, a durable topic exchange and a quorum queue bound to it for every key. */
async function rabbitRoute(): Promise<Route> {
  const vhost: RabbitVhost = await createRabbitVhost();
  const connection = await amqp.connect(vhost.url());
  const channel = await connection.createChannel();
  const exchange = 'cross-x';
  const queue = 'cross-q';
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await channel.bindQueue(queue, exchange, '#');
  await connection.close();
  return {
    broker: { name: 'rabbit', type: 'rabbitmq', url: vhost.url(), exchange, events: ['test.cross.*'] },
    consumerEnv: { BROKER: 'rabbitmq', AMQP_URL: vhost.url(), QUEUE: queue },
    close: () => vhost.drop(),
  };
}

/** A nats-server of the test's own, a stream and a durable consumer with explicit acks, redelivering after 2 s. */
async function jetStreamRoute(): Promise<Route> {
  const server: NatsServer = await createNatsServer();
  const nc: NatsConnection = await connect({ servers: server.url });
  const stream = uniqueName('cross').replace(/-/g, '_');
  const durable = 'app-b';
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`], duplicate_window: nanos(120_000) });
  await jsm.consumers.add(stream, {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(2000),
    max_ack_pending: IN_FLIGHT,
    max_deliver: -1,
  });
  await nc.close();
  return {
    broker: {
      name: 'nats',
      type: 'nats',
      servers: server.url,
      stream,
      subject: (e) => `${stream}.${e.eventName}`,
      events: ['test.cross.*'],
    },
    consumerEnv: { BROKER: 'jetstream', NATS_SERVERS: server.url, STREAM: stream, DURABLE: durable },
    close: () => server.remove(),
  };
}

/** The `OUTCOME <outcome> <id> <delivery count>` lines app B printed. */
function outcomes(b: ChildRelay): { outcome: string; id: string; deliveryCount: string }[] {
  return b.lines
    .filter((line) => line.startsWith('OUTCOME '))
    .map((line) => {
      const [, outcome, id, deliveryCount] = line.split(' ');
      return { outcome: outcome!, id: id!, deliveryCount: deliveryCount! };
    });
}

describe.each([
  ['RabbitMQ', rabbitRoute],
  ['JetStream', jetStreamRoute],
] as const)('app A → %s → app B (SIGKILLed and restarted)', (label, makeRoute) => {
  let dbA: TestDatabase;
  let dbB: TestDatabase;
  let route: Route;
  let a: TestApp | undefined;
  const children: ChildRelay[] = [];

  beforeAll(async () => {
    dbA = await createTestDatabase();
    dbB = await createTestDatabase(INBOX_EFFECTS_SQL);
    route = await makeRoute();
  });
  afterAll(async () => {
    for (const child of children) await child.kill('SIGKILL');
    await a?.close();
    await route?.close();
    await dbA?.drop();
    await dbB?.drop();
  });

  const rows = async (): Promise<{ n: number; ids: number }> => {
    const [row] = await dbB.sql<{ n: number; ids: number }>(
      'select count(*)::int as n, count(distinct message_id)::int as ids from inbox_effects',
    );
    return row!;
  };
  const startB = async (env: Record<string, string> = {}): Promise<ChildRelay> => {
    const child = await startChildRelay(
      { DATABASE_URL: dbB.url, ...route.consumerEnv, ...env },
      { script: CHILD },
    );
    children.push(child);
    return child;
  };

  it(`writes one row per event of app A's transactions, ${EVENTS} events`, async () => {
    a = await buildApp({
      url: dbA.url,
      outbox: {
        relay: { batchSize: 100 },
        maxAttempts: 20,
        backoff: { baseMs: 10, capMs: 200, jitter: 0 },
      },
      brokers: { brokers: [route.broker] },
    });
    const ids = await enqueueOrders(a, ORDERS, EVENTS, 50);
    const first = await startB({ LOSE_ACKS_AFTER: String(ACKED_BEFORE_KILL) });
    const forwarded = a.relay.drain();

    // B committed and acknowledged ACKED_BEFORE_KILL, then committed IN_FLIGHT more whose acks never left
    const lostAcks = (): Set<string> =>
      new Set(first.lines.filter((l) => l.startsWith('ACK_LOST ')).map((l) => l.split(' ')[1]!));
    await waitFor(() => lostAcks().size === IN_FLIGHT, {
      timeoutMs: 60_000,
      message: `app B committing ${IN_FLIGHT} messages whose acks are lost`,
    });
    const atKill = await rows();
    await first.kill('SIGKILL');
    expect(atKill).toEqual({ n: ACKED_BEFORE_KILL + IN_FLIGHT, ids: ACKED_BEFORE_KILL + IN_FLIGHT });

    const second = await startB();
    expect(await forwarded).toMatchObject({ succeeded: EVENTS, failed: 0, dead: 0 });
    const unacked = [...lostAcks()];
    await waitFor(
      async () => {
        const skipped = new Set(
          outcomes(second)
            .filter((o) => o.outcome === 'duplicate')
            .map((o) => o.id),
        );
        return (await rows()).n === EVENTS && unacked.every((id) => skipped.has(id));
      },
      { timeoutMs: 90_000, message: 'every row written, and the messages whose acks were lost skipped' },
    );

    expect(await rows()).toEqual({ n: EVENTS, ids: EVENTS });
    const written = await dbB.sql<{ message_id: string }>('select message_id from inbox_effects');
    expect(written.map((r) => r.message_id).sort()).toEqual([...ids].sort());
    const seen = [...outcomes(first), ...outcomes(second)];
    expect(seen.filter((o) => o.outcome === 'retry' || o.outcome === 'dead')).toEqual([]);
    const redeliveries = seen.filter((o) => o.deliveryCount !== '1').length;
    const duplicates = seen.filter((o) => o.outcome === 'duplicate').length;
    expect(duplicates).toBeGreaterThanOrEqual(IN_FLIGHT);
    process.stdout.write(
      `cross-app through ${label}: ${EVENTS} events, ${EVENTS} rows (${ACKED_BEFORE_KILL + IN_FLIGHT} before ` +
        `the SIGKILL), ${redeliveries} redeliveries seen, ${duplicates} duplicates skipped by the inbox\n`,
    );
  }, 180_000);
});
