/** Builds a Nest application context with the outbox wired as a user would: ScheduleModule, TypeORM, OutboxModule. */
import { Global, Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import {
  OutboxModule,
  OutboxRelay,
  OutboxService,
  type OutboxRelayOptions,
  type OutboxRetentionOptions,
} from 'nestjs-pg-outbox';
import { QueryProbe } from './query-probe';
import { OUTBOX_RELAY_POLICY_SWITCHES, type RelayPolicy } from '../../libs/outbox/src/options/relay-policy';

/**
 * Switches of the relay's policy that every bench app of this process takes when `policy` is not given: JSON in
 * BENCH_RELAY_POLICY, e.g. `{"leanClaim":false}` (the decision scripts and the peers bench measure a mechanism
 * against its absence with it; worker processes inherit it).
 */
export const RELAY_POLICY_ENV = 'BENCH_RELAY_POLICY';

/** The switches BENCH_RELAY_POLICY gives, or none. */
export function relayPolicySwitches(): Partial<RelayPolicy> {
  const raw = process.env[RELAY_POLICY_ENV]?.trim();
  return raw ? (JSON.parse(raw) as Partial<RelayPolicy>) : {};
}

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
  /** Retention options (the library's defaults unless set; retention runs only where the relay is enabled). */
  retention?: OutboxRetentionOptions;
  /** Feature modules the app imports besides the outbox (e.g. `OutboxAdminModule` for the doctor). */
  imports?: readonly (Type | DynamicModule)[];
  /** Switches over the relay's policy (internal, not options: see `RelayPolicy`); BENCH_RELAY_POLICY's unless set. */
  policy?: Partial<RelayPolicy>;
}

/** Provides the switches of the relay's policy to the app's OutboxModule (its own: one app never sees another's). */
@Global()
@Module({})
class RelayPolicySwitchesModule {
  static forRoot(switches: Partial<RelayPolicy>): DynamicModule {
    return {
      module: RelayPolicySwitchesModule,
      providers: [{ provide: OUTBOX_RELAY_POLICY_SWITCHES, useValue: switches }],
      exports: [OUTBOX_RELAY_POLICY_SWITCHES],
    };
  }
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
        RelayPolicySwitchesModule.forRoot(options.policy ?? relayPolicySwitches()),
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
          retention: options.retention,
        }),
        ...(options.imports ?? []),
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
