// Imports every entry of the package and boots an app with each feature module beside OutboxModule (relay off),
// then apps with the modules whose peers the outside app did not install: brokers of each type (amqplib, the
// @nats-io clients) and the observability modules (prom-client, @opentelemetry/api).
// Prints `RESULT <json>`. Copied into the outside app as src/every-entry.ts (CommonJS and ES modules alike).
import 'reflect-metadata';
import { Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxConfigurationError, OutboxModule, OutboxService } from 'nestjs-pg-outbox';
import { OutboxAdminModule, OutboxAdminService, OutboxHealthIndicator } from 'nestjs-pg-outbox/admin';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { BROKER_ERROR_CODES, OutboxBrokersModule } from 'nestjs-pg-outbox/brokers';
import { OutboxInbox, OutboxInboxModule } from 'nestjs-pg-outbox/inbox';
import { OutboxMetricsModule, OutboxTracingModule } from 'nestjs-pg-outbox/observability';
import { OutboxTestKit } from 'nestjs-pg-outbox/testing';
import {
  generateWebhookSecret,
  OutboxWebhooksModule,
  OutboxWebhookSubscriptions,
} from 'nestjs-pg-outbox/webhooks';

const TENANT = '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b';

/**
 * The app, with the given feature modules. `idleTimeoutMs`: how long the pool keeps idle connections; a boot that
 * fails leaves its DataSource open, whose idle connections would keep this process alive for pg's default 10 s.
 */
function appModule(features: DynamicModule[], idleTimeoutMs = 10_000): new () => object {
  @Module({
    imports: [
      ScheduleModule.forRoot(),
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: process.env.DATABASE_URL,
        extra: { idleTimeoutMillis: idleTimeoutMs },
      }),
      OutboxModule.forRoot({ relay: { enabled: false } }),
      ...features,
    ],
  })
  class EveryEntryApp {}
  return EveryEntryApp;
}

/** Boots an app with the given feature modules; returns its problems (empty when it booted and closed). */
async function bootProblems(features: DynamicModule[]): Promise<string[]> {
  try {
    const app = await NestFactory.createApplicationContext(appModule(features, 100), {
      logger: false,
      abortOnError: false,
    });
    await app.close();
    return [];
  } catch (error) {
    return error instanceof OutboxConfigurationError ? [...error.problems] : [String(error)];
  }
}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(
    appModule([
      OutboxWebhooksModule.forRoot({ webhooks: [] }),
      OutboxBrokersModule.forRoot({ brokers: [], transports: [] }),
      OutboxInboxModule.forRoot(),
      OutboxAdminModule.forRoot({ allowUnguarded: true }),
      OutboxBoardModule.forRoot({ allowUnguarded: true, tenants: () => 'all' }),
    ]),
    { logger: ['error', 'warn'] },
  );
  const stats = await app.get(OutboxAdminService).stats(TENANT);
  const health = await app.get(OutboxHealthIndicator).isHealthy('outbox');
  const booted = {
    service: app.get(OutboxService) instanceof OutboxService,
    webhookSubscriptions: app.get(OutboxWebhookSubscriptions) instanceof OutboxWebhookSubscriptions,
    inbox: app.get(OutboxInbox) instanceof OutboxInbox,
    testKit: OutboxTestKit.for(app) instanceof OutboxTestKit,
    webhookSecret: typeof generateWebhookSecret(),
    brokerErrorCodes: typeof BROKER_ERROR_CODES,
  };
  await app.close();
  const result = {
    booted,
    events: stats.events,
    healthStatus: health.outbox.status,
    brokerProblems: await bootProblems([
      OutboxBrokersModule.forRoot({
        brokers: [
          { name: 'rabbit', type: 'rabbitmq', url: 'amqp://127.0.0.1', exchange: 'x', events: ['*'] },
          { name: 'nats', type: 'nats', servers: 'nats://127.0.0.1:4222', events: ['*'] },
        ],
      }),
    ]),
    metricsProblems: await bootProblems([OutboxMetricsModule.forRoot()]),
    tracingProblems: await bootProblems([OutboxTracingModule.forRoot()]),
  };
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
