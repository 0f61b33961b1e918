import { Injectable, Module } from '@nestjs/common';
import { OutboxConfigurationError, type OutboxModuleOptions } from 'nestjs-pg-outbox';
import { OutboxAdminService } from 'nestjs-pg-outbox/admin';
import {
  OutboxBrokersModule,
  type OutboxBrokersModuleOptions,
  type OutboxTransport,
  type OutboxTransportBatch,
  type OutboxTransportOutcome,
} from 'nestjs-pg-outbox/brokers';
import { buildApp, type TestApp } from '../support/build-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

const TENANT = '2b3c4d5e-6f70-4a81-92a3-b4c5d6e7f809';

/** Records the event ids it is handed; every delivery succeeds. */
@Injectable()
class RecordingTransport implements OutboxTransport {
  readonly received: string[] = [];
  send(batch: OutboxTransportBatch): Promise<OutboxTransportOutcome[]> {
    this.received.push(...batch.deliveries.map((d) => d.event.eventId));
    return Promise.resolve(batch.deliveries.map(() => ({ status: 'delivered' as const })));
  }
}

/** Where `forRootAsync` takes the transport from: a module of the app, imported by the factory. */
@Module({ providers: [RecordingTransport], exports: [RecordingTransport] })
class TransportHostModule {}

describe('OutboxBrokersModule', () => {
  let db: TestDatabase;
  let t: TestApp | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const bootError = async (
    outbox: Record<string, unknown>,
    brokers?: OutboxBrokersModuleOptions,
  ): Promise<OutboxConfigurationError> => {
    const failure = buildApp({ url: db.url, outbox: outbox as OutboxModuleOptions, brokers });
    const error = await failure.then(
      async (app) => {
        t = app;
        throw new Error('app.init() resolved');
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OutboxConfigurationError);
    return error as OutboxConfigurationError;
  };

  it.each([
    [
      'brokers',
      [{ name: 'r', type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: 'x', events: ['*'] }],
      "option brokers is now OutboxBrokersModule.forRoot({ brokers }) of 'nestjs-pg-outbox/brokers'",
    ],
    [
      'transports',
      [{ name: 't', events: ['*'], transport: new RecordingTransport() }],
      "option transports is now OutboxBrokersModule.forRoot({ transports }) of 'nestjs-pg-outbox/brokers'",
    ],
  ])(
    'OutboxModule.forRoot({ %s }) makes app.init() reject, naming where the option went',
    async (option, value, text) => {
      const error = await bootError({ [option]: value });
      expect(error.problems).toEqual([expect.stringContaining(text)]);
    },
  );

  it('reports a list option that is not an array with the other wiring problems, in one boot error', async () => {
    const error = await bootError(
      { relay: { batchSize: 0 } },
      {
        transports: { name: 't', events: ['*'] } as never,
        brokers: [{ name: 'k', type: 'kafka', events: ['*'] } as never],
      },
    );
    expect(error.problems).toEqual(
      expect.arrayContaining([
        expect.stringContaining('option transports must be an array of transports, got'),
        expect.stringContaining('option brokers[0] ("k").type must be "rabbitmq" or "nats"'),
        expect.stringContaining('option relay.batchSize'),
      ]),
    );
    expect(error.problems).toHaveLength(3);
  });

  it('forRootAsync takes its options from a factory, and its transports receive the events', async () => {
    t = await buildApp({
      url: db.url,
      imports: [
        OutboxBrokersModule.forRootAsync({
          imports: [TransportHostModule],
          inject: [RecordingTransport],
          useFactory: (transport: RecordingTransport) => ({
            transports: [{ name: 'recorded', events: ['test.brokers.*'], transport }],
          }),
        }),
      ],
    });
    const id = await t.dataSource.transaction((m) =>
      t!.outbox.enqueue(m, { tenantId: TENANT, eventName: 'test.brokers.created.v1', payload: {} }),
    );
    expect(await t.relay.drain()).toMatchObject({ succeeded: 1, failed: 0, dead: 0 });
    expect(t.app.get(RecordingTransport).received).toEqual([id]);
  });

  it('is optional: without it the admin stats list no broker circuits', async () => {
    t = await buildApp({ url: db.url });
    const stats = await t.app.get(OutboxAdminService).stats(TENANT);
    expect(stats.brokerCircuits).toEqual([]);
  });
});
