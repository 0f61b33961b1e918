/** Builds a Nest application context with the outbox wired as a user would: ScheduleModule, TypeORM, OutboxModule. */
import { Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { OutboxModule, OutboxRelay, OutboxService, type OutboxRelayOptions } from 'nestjs-pg-outbox';
import { QueryProbe } from './query-probe';

/** Options of {@link createBenchApp}. */
export interface BenchAppOptions {
  url: string;
  /** Providers hosting `@OnOutboxEvent` handlers. */
  consumers: readonly Type[];
  /** Relay options; `enabled` defaults to false here (the scenario drives the relay) unless set. */
  relay?: OutboxRelayOptions;
  /** `preparedStatements` of the outbox (its default unless set). */
  preparedStatements?: boolean;
  /** TypeORM pool size. Default 10 (pg's default). */
  poolSize?: number;
  /** `application_name` of the app's connections, to find them in `pg_stat_activity`. */
  applicationName?: string;
  /** Attach the query probe (default true); off where nothing reads it, so timed runs do not carry it. */
  probe?: boolean;
}

/** A running app and the pieces scenarios use. */
export interface BenchApp {
  context: INestApplicationContext;
  relay: OutboxRelay;
  outbox: OutboxService;
  dataSource: DataSource;
  /** Counts and times every round trip the app's pool makes (unless created with `probe: false`). */
  probe: QueryProbe;
  close(): Promise<void>;
}

@Module({})
class BenchAppModule {
  static forRoot(options: BenchAppOptions): DynamicModule {
    return {
      module: BenchAppModule,
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: options.url,
          logging: false,
          extra: { max: options.poolSize ?? 10, application_name: options.applicationName ?? 'bench-app' },
        }),
        OutboxModule.forRoot({
          relay: { enabled: false, ...options.relay },
          preparedStatements: options.preparedStatements,
        }),
      ],
      providers: [...options.consumers],
    };
  }
}

/** Creates and initialises the app (`NestFactory.createApplicationContext`); errors are thrown, not fatal. */
export async function createBenchApp(options: BenchAppOptions): Promise<BenchApp> {
  const context = await NestFactory.createApplicationContext(BenchAppModule.forRoot(options), {
    logger: ['error'],
    abortOnError: false,
  });
  const dataSource = context.get(DataSource);
  let closing: Promise<void> | null = null;
  return {
    context,
    relay: context.get(OutboxRelay),
    outbox: context.get(OutboxService),
    dataSource,
    probe: options.probe === false ? QueryProbe.none() : QueryProbe.attach(dataSource),
    close: () => (closing ??= context.close()),
  };
}
