import { join } from 'node:path';
import { connect, nanos } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { createNatsServer, type NatsServer } from '../support/broker-servers';
import { uniqueName } from '../support/brokers';
import { deliveredCount } from '../support/forwarding';
import { waitFor } from '../support/wait-for';
import { useFaultFixture } from './support/fault-fixture';
import { pace } from './support/fault-fleet';
import { faultRandom } from './support/fault-random';
import { checkHistory, timeToQuiet } from './support/history';
import { enqueueLoad } from './support/load';

const EVENTS = 10_000;
const CONSUMER = 'broker:nats';
const RELAY = join(__dirname, '..', 'support', 'broker-relay-child.ts');

/**
 * The test's own nats-server (JetStream, a store of its own) is killed with SIGKILL and started again, twice,
 * while three relay processes forward the load to a stream with a two-minute duplicate window.
 */
describe('fault: the broker restarted while three relays forward to it', () => {
  const random = faultRandom(__filename);
  const fixture = useFaultFixture(random);
  let server: NatsServer;
  beforeAll(async () => {
    server = await createNatsServer();
  });
  afterAll(() => server?.remove());

  /** The `Nats-Msg-Id` (the event id) of every message in the stream, read on a connection of its own. */
  const messageIds = async (stream: string): Promise<string[]> => {
    const nc = await connect({ servers: server.url });
    try {
      const count = (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
      const ids: string[] = [];
      const messages = await (await jetstream(nc).consumers.get(stream)).consume({ max_messages: 1000 });
      for await (const m of messages) {
        ids.push(m.headers?.get('Nats-Msg-Id') ?? '');
        if (ids.length >= count) break;
      }
      return ids;
    } finally {
      await nc.close();
    }
  };

  it('loses nothing and leaves one message per event when the server is SIGKILLed twice mid-forward', async () => {
    const stream = uniqueName('fault_broker').replace(/-/g, '_');
    const admin = await connect({ servers: server.url });
    await (
      await jetstreamManager(admin)
    ).streams.add({ name: stream, subjects: [`${stream}.>`], duplicate_window: nanos(120_000) });
    await admin.close();
    const ids = await enqueueLoad(fixture.db.url, EVENTS);
    const brokers = [
      {
        name: 'nats',
        type: 'nats',
        servers: server.url,
        stream,
        events: ['fault.load.v1'],
        timeoutMs: 2000,
        reconnect: { baseMs: 20, capMs: 200 },
      },
    ];
    const fleet = await fixture.startFleet(
      3,
      { BROKERS: JSON.stringify(brokers), SUBJECT_PREFIX: `${stream}.` },
      RELAY,
    );
    // restart points: somewhere in the first and in the second half of the forwarding
    const points = [0.1 + random.int(30) / 100, 0.5 + random.int(30) / 100];
    const before: number[] = [];
    for (const point of points) {
      await waitFor(async () => (await deliveredCount(fixture.db, CONSUMER)) >= EVENTS * point, {
        timeoutMs: 120_000,
        message: `${Math.round(point * 100)}% of the deliveries recorded as delivered`,
      });
      before.push(await deliveredCount(fixture.db, CONSUMER));
      await server.stop('SIGKILL');
      await pace(100 + random.int(900));
      await server.start();
    }
    const recoveryMs = await timeToQuiet(fixture.db, 120_000);
    await fleet.stopAll();

    // the stream's messages are the consumer's effects: each event once, none unknown to the outbox
    const stored = await messageIds(stream);
    await fixture.db.sql(
      `insert into fault_effects (event_id, consumer) select id, $2 from unnest($1::uuid[]) as x(id)`,
      [stored, CONSUMER],
    );
    const [counts] = await fixture.db.sql<{ retried: number; duplicates: number }>(
      `select count(*) filter (where attempt_count > 1)::int as retried,
              count(*) filter (where external_run_id like '% duplicate')::int as duplicates
         from outbox_deliveries where consumer_name = $1`,
      [CONSUMER],
    );
    const report = await checkHistory(fixture.db, {
      scenario: '3 broker relays, nats-server SIGKILLed x2 mid-forward',
      table: 'fault_effects',
      consumers: [CONSUMER],
      faults: points.length,
      recoveryMs,
      expectedEvents: ids,
    });
    console.log(
      `[faults] broker restarts at ${before.join(' and ')} of ${EVENTS} deliveries recorded: ${counts!.retried} deliveries ` +
        `retried, ${counts!.duplicates} re-publishes dropped by the duplicate window`,
    );
    expect(before.every((n) => n < EVENTS)).toBe(true);
    expect(stored).toHaveLength(EVENTS);
    expect(report).toMatchObject({ events: EVENTS, lost: 0, duplicated: 0, phantom: 0, leftOpen: 0 });
  });
});
