/**
 * Which broker packages an app with the inbox loads: `node --conditions=@nestjs-pg-outbox/source -r
 * @swc-node/register test/support/inbox-peers-child.ts`. Env: DATABASE_URL; INBOX=1 imports OutboxInboxModule
 * beside OutboxModule. Boots the app with NestFactory (not @nestjs/testing, which preloads @nestjs/microservices
 * when it is installed), closes it, and prints `LOADED <json>`: the broker packages found in `require.cache`.
 */
import 'reflect-metadata';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule } from 'nestjs-pg-outbox';
import { OutboxInbox, OutboxInboxModule } from 'nestjs-pg-outbox/inbox';

const BROKER_PACKAGES = [
  '@nestjs/microservices',
  'amqplib',
  'amqp-connection-manager',
  '@nats-io/transport-node',
  '@nats-io/jetstream',
];

async function main(): Promise<void> {
  const imports: DynamicModule[] = [
    ScheduleModule.forRoot(),
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL }),
    OutboxModule.forRoot({ relay: { enabled: false } }),
  ];
  if (process.env.INBOX === '1') imports.push(OutboxInboxModule.forRoot());
  @Module({ imports })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const hasInbox = (() => {
    try {
      return app.get(OutboxInbox, { strict: false }) instanceof OutboxInbox;
    } catch {
      return false;
    }
  })();
  await app.close();
  const loaded = BROKER_PACKAGES.filter((pkg) =>
    Object.keys(require.cache).some((path) => path.includes(`/node_modules/${pkg}/`)),
  );
  process.stdout.write(`INBOX ${hasInbox}\nLOADED ${JSON.stringify(loaded)}\n`);
}

void main().catch((error) => {
  process.stderr.write(`${String(error?.stack ?? error)}\n`);
  process.exit(1);
});
