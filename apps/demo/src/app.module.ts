import { Module, type DynamicModule } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Registry } from 'prom-client';
import { OutboxModule } from 'nestjs-pg-outbox';
import { OutboxAdminModule } from 'nestjs-pg-outbox/admin';
import { OutboxBoardModule } from 'nestjs-pg-outbox/board';
import { OutboxMetricsModule } from 'nestjs-pg-outbox/observability';
import { OutboxWebhooksModule } from 'nestjs-pg-outbox/webhooks';
import { demoMigrations } from '../../../migrations';
import { ContactsModule } from './contacts/contacts.module';
import { Contact } from './contacts/contact.entity';
import { ContactActivity } from './contacts/contact-activity.entity';
import { DemoWebhooksModule } from './webhooks/demo-webhooks.module';
import { DemoWebhookReceiver } from './webhooks/demo-webhook-receiver';
import { DemoAdminGuard } from './demo-admin.guard';
import { DEMO_METRICS_REGISTRY, DemoMetricsController } from './demo-metrics.controller';

/** The demo CRM: contacts, their events, and the outbox that delivers them. */
@Module({})
export class AppModule {
  /** `relay: false` leaves the relay to the caller (the demo's own tests drive it with the test kit). */
  static forRoot(databaseUrl: string, { relay = true }: { relay?: boolean } = {}): DynamicModule {
    // the app's own Prometheus registry, served at /metrics; the outbox registers its metrics on it
    const registry = new Registry();
    return {
      module: AppModule,
      controllers: [DemoMetricsController],
      providers: [{ provide: DEMO_METRICS_REGISTRY, useValue: registry }],
      imports: [
        ScheduleModule.forRoot(),
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: databaseUrl,
          entities: [Contact, ContactActivity],
          // the outbox's migrations, then the app's (migrations/); the quick way, at start. In production, run
          // them before the app starts with TypeORM's CLI instead: npm run migration:run (migrations/data-source.ts)
          migrations: demoMigrations,
          migrationsRun: true,
          // Bounds on the app's own transactions, which the outbox cannot bound (docs/operating.md#failover).
          extra: {
            keepAlive: true,
            keepAliveInitialDelayMillis: 10_000,
            connectionTimeoutMillis: 5_000,
            statement_timeout: 10_000,
            query_timeout: 15_000,
            idle_in_transaction_session_timeout: 30_000,
            maxLifetimeSeconds: 30,
          },
        }),
        OutboxModule.forRoot({ relay: { enabled: relay, pollIntervalMs: 500 } }),
        // forRootAsync: the webhook's URL and secret come from the receiver the demo starts on a loopback port.
        OutboxWebhooksModule.forRootAsync({
          imports: [DemoWebhooksModule],
          inject: [DemoWebhookReceiver],
          useFactory: (receiver: DemoWebhookReceiver) => ({
            webhooks: [
              {
                name: 'contacts-receiver',
                url: receiver.url,
                events: ['crm.contact.*'],
                timeoutMs: 5000,
                secret: receiver.secret,
              },
            ],
          }),
        }),
        // Stats, failed events and replay over HTTP, behind a guard (never expose these routes without one).
        OutboxAdminModule.forRoot({ guards: [DemoAdminGuard] }),
        // The operator's board at /outbox/board, behind the same guard; the demo's operator sees every tenant.
        OutboxBoardModule.forRoot({ guards: [DemoAdminGuard], tenants: () => 'all' }),
        OutboxMetricsModule.forRoot({ registry }),
        ContactsModule,
      ],
    };
  }
}
