import { Logger, type DynamicModule, type LoggerService, type Provider, type Type } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test, type TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxModule, OutboxRelay, OutboxService, type OutboxModuleOptions } from 'nestjs-pg-outbox';
import { OutboxAdminModule } from 'nestjs-pg-outbox/admin';
import { OutboxBrokersModule, type OutboxBrokersModuleOptions } from 'nestjs-pg-outbox/brokers';
import { OutboxWebhooksModule, type OutboxWebhooksModuleOptions } from 'nestjs-pg-outbox/webhooks';

/** A Nest app with the outbox wired as a user would, on a test database. */
export interface TestApp {
  app: TestingModule;
  relay: OutboxRelay;
  outbox: OutboxService;
  dataSource: DataSource;
  close(): Promise<void>;
}

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  url: string;
  providers?: Provider[];
  imports?: (DynamicModule | Type)[];
  outbox?: OutboxModuleOptions;
  /** Imports `OutboxWebhooksModule.forRoot(webhooks)` when given. */
  webhooks?: OutboxWebhooksModuleOptions;
  /** Imports `OutboxBrokersModule.forRoot(brokers)` when given. */
  brokers?: OutboxBrokersModuleOptions;
  /** Imports `OutboxAdminModule` (its service and health indicator); default true. */
  admin?: boolean;
  schedule?: boolean;
  typeorm?: boolean;
  poolSize?: number;
  /** More pg pool settings, passed as TypeORM's `extra` (e.g. `keepAlive`, `query_timeout`, a `Client` class). */
  extra?: Record<string, unknown>;
  logger?: LoggerService | false;
}

/** Builds and initialises the app; by default the relay does not poll on its own (tests drive it). */
export async function buildApp(options: BuildAppOptions): Promise<TestApp> {
  const imports: (DynamicModule | Type)[] = [];
  if (options.schedule !== false) imports.push(ScheduleModule.forRoot());
  if (options.typeorm !== false) {
    imports.push(
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: options.url,
        extra: { max: options.poolSize ?? 10, ...options.extra },
      }),
    );
  }
  imports.push(
    OutboxModule.forRoot({ ...options.outbox, relay: { enabled: false, ...options.outbox?.relay } }),
  );
  if (options.webhooks) imports.push(OutboxWebhooksModule.forRoot(options.webhooks));
  if (options.brokers) imports.push(OutboxBrokersModule.forRoot(options.brokers));
  if (options.admin !== false) imports.push(OutboxAdminModule);
  imports.push(...(options.imports ?? []));
  const app = await Test.createTestingModule({ imports, providers: options.providers ?? [] })
    .setLogger(options.logger === undefined ? quietLogger : options.logger || quietLogger)
    .compile();
  await app.init();
  const relay = app.get(OutboxRelay);
  return {
    app,
    relay,
    outbox: app.get(OutboxService),
    dataSource: app.get(DataSource),
    close: async () => {
      await app.close();
      if (relay.isRunning) throw new Error('the relay is still running after app.close()');
    },
  };
}

/** Keeps test output readable: only errors from the app, unless OUTBOX_TEST_LOGS is set. */
const quietLogger: LoggerService = process.env.OUTBOX_TEST_LOGS
  ? new Logger()
  : {
      log: () => undefined,
      warn: () => undefined,
      error: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    };
