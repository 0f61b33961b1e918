/**
 * Boots an app with the outbox, enqueues one event in a transaction, closes, and prints which optional peer
 * packages were loaded (from `require.cache`). With OPTIONAL_PEERS=cls the app uses the transactionHost option (=brokers: a broker of each type),
 * so the check can be seen to fail. Run by test/package/optional-peers.e2e-spec.ts in a process of its own.
 */
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { ScheduleModule } from '@nestjs/schedule';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DynamicModule } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { OutboxModule, OutboxService } from 'nestjs-pg-outbox';
import { OutboxBrokersModule } from 'nestjs-pg-outbox/brokers';

const PEERS = /[\\/]node_modules[\\/](nestjs-cls|@nestjs-cls[\\/][^\\/]+|amqplib|@nats-io[\\/][^\\/]+)[\\/]/;

async function main(): Promise<void> {
  const withCls = process.env.OPTIONAL_PEERS === 'cls';
  const imports: DynamicModule[] = [
    ScheduleModule.forRoot(),
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL }),
  ];
  if (withCls) {
    // loaded by the app itself only in this mode: a static import would load them in both
    /* eslint-disable @typescript-eslint/no-require-imports -- loaded only in this mode, as said above */
    const { ClsModule } = require('nestjs-cls');
    const { ClsPluginTransactional } = require('@nestjs-cls/transactional');
    const { TransactionalAdapterTypeOrm } = require('@nestjs-cls/transactional-adapter-typeorm');
    /* eslint-enable @typescript-eslint/no-require-imports */
    imports.push(
      ClsModule.forRoot({
        global: true,
        plugins: [
          new ClsPluginTransactional({
            adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken() }),
          }),
        ],
      }),
    );
  }
  // brokers: a forwarder of each type, never connected (the relay is off): their clients load at boot all the same
  const brokers =
    process.env.OPTIONAL_PEERS === 'brokers'
      ? [
          { name: 'r', type: 'rabbitmq' as const, url: 'amqp://127.0.0.1', exchange: 'x', events: ['*'] },
          { name: 'n', type: 'nats' as const, servers: 'nats://127.0.0.1:4222', events: ['*'] },
        ]
      : [];
  imports.push(
    OutboxModule.forRoot({ relay: { enabled: false }, transactionHost: withCls }),
    OutboxBrokersModule.forRoot({ brokers }),
  );
  const app = await Test.createTestingModule({ imports })
    .setLogger(false as never)
    .compile();
  await app.init();
  const dataSource = app.get<DataSource>(getDataSourceToken());
  await dataSource.transaction((manager) =>
    app.get(OutboxService).enqueue(manager, {
      tenantId: '0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5',
      eventName: 'test.peers.v1',
      payload: {},
    }),
  );
  await app.close();
  const loaded = [...new Set(Object.keys(require.cache).flatMap((path) => PEERS.exec(path)?.[1] ?? []))];
  process.stdout.write(`LOADED ${JSON.stringify(loaded.sort())}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
