import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ConfigurableOutboxModule } from './outbox.module-definition';
import { outboxOptionsProviders } from './outbox-options.provider';
import { OutboxService } from './enqueue/outbox.service';
import { OutboxExplorer } from './discovery/outbox.explorer';
import { OutboxConsumerRegistry } from './registry/outbox-consumer.registry';
import { OutboxRelay } from './relay/outbox.relay';
import { OutboxWakeup } from './relay/outbox-wakeup';
import { InProcessDispatcher } from './delivery/in-process.dispatcher';
import { ExternalDispatcher } from './delivery/external.dispatcher';
import { OutboxStore } from './store/outbox.store';

/**
 * The transactional outbox. Import once with `OutboxModule.forRoot(options)` or `forRootAsync(…)`, next to
 * `ScheduleModule.forRoot()` and `TypeOrmModule.forRoot(…)`, which the app imports itself.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    ...outboxOptionsProviders,
    OutboxStore,
    OutboxService,
    OutboxConsumerRegistry,
    OutboxExplorer,
    InProcessDispatcher,
    ExternalDispatcher,
    OutboxRelay,
    OutboxWakeup,
  ],
  exports: [OutboxService, OutboxConsumerRegistry, OutboxRelay],
})
export class OutboxModule extends ConfigurableOutboxModule {}
