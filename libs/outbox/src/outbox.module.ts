import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ConfigurableOutboxModule, OUTBOX_RESOLVED_OPTIONS } from './options/outbox.module-definition';
import { outboxOptionsProviders } from './options/outbox-options.provider';
import { relayPolicyProvider } from './options/relay-policy';
import { OutboxService } from './enqueue/outbox.service';
import { OutboxExplorer } from './consumers/outbox.explorer';
import { OutboxConsumerRegistry } from './consumers/outbox-consumer.registry';
import { OutboxRelay } from './relay/outbox.relay';
import { OutboxWakeup } from './enqueue/outbox-wakeup';
import { InProcessDispatcher } from './batch/in-process.dispatcher';
import { ExternalDispatcher } from './batch/external.dispatcher';
import { OutboxStore } from './store/outbox.store';
import { OUTBOX_STORE_PORT } from './store/outbox-store.port';
import { PgRelayStore } from './store/pg-relay-store';
import { OutboxRetention } from './maintenance/outbox.retention';
import { LeaseVacuum } from './maintenance/lease-vacuum';
import { OutboxBackfill } from './consumers/outbox-backfill';
import { OutboxSchemaRegistry } from './events/outbox-schema.registry';
import { AmbientTransactions } from './cls/ambient-transactions';
import { OutboxInstrumentation } from './extension/outbox-instrumentation';

/**
 * The transactional outbox. Import once with `OutboxModule.forRoot(options)` or `forRootAsync(…)`, next to
 * `ScheduleModule.forRoot()` and `TypeOrmModule.forRoot(…)`, which the app imports itself.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    ...outboxOptionsProviders,
    relayPolicyProvider,
    OutboxStore,
    { provide: OUTBOX_STORE_PORT, useClass: PgRelayStore },
    OutboxService,
    OutboxConsumerRegistry,
    OutboxExplorer,
    InProcessDispatcher,
    ExternalDispatcher,
    OutboxRelay,
    OutboxWakeup,
    OutboxRetention,
    OutboxBackfill,
    LeaseVacuum,
    OutboxSchemaRegistry,
    AmbientTransactions,
    OutboxInstrumentation,
  ],
  exports: [
    OutboxService,
    OutboxConsumerRegistry,
    OutboxRelay,
    OutboxRetention,
    OutboxBackfill,
    OutboxInstrumentation,
    // for the feature modules (internal: not exported by the package's index)
    OutboxStore,
    OUTBOX_RESOLVED_OPTIONS,
    AmbientTransactions,
  ],
})
export class OutboxModule extends ConfigurableOutboxModule {}
