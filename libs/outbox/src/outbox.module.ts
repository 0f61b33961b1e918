import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ConfigurableOutboxModule, OUTBOX_RESOLVED_OPTIONS } from './outbox.module-definition';
import { outboxOptionsProviders } from './outbox-options.provider';
import { OutboxService } from './enqueue/outbox.service';
import { OutboxExplorer } from './discovery/outbox.explorer';
import { OutboxConsumerRegistry } from './registry/outbox-consumer.registry';
import { OutboxRelay } from './relay/outbox.relay';
import { OutboxWakeup } from './relay/outbox-wakeup';
import { InProcessDispatcher } from './delivery/in-process.dispatcher';
import { ExternalDispatcher } from './delivery/external.dispatcher';
import { OutboxStore } from './store/outbox.store';
import { OutboxAdminService } from './admin/outbox-admin.service';
import { OutboxHealthIndicator } from './admin/outbox.health-indicator';
import { OutboxRetention } from './maintenance/outbox.retention';
import { LeaseVacuum } from './maintenance/lease-vacuum';
import { OutboxWebhookService } from './delivery/webhook/outbox-webhook.service';
import { WebhookTransport } from './delivery/webhook/webhook.transport';
import { WebhookTargetGuard } from './delivery/webhook/webhook-target-guard';
import { SubscriptionSecretCipher } from './delivery/webhook/subscription-secret-cipher';
import { WebhookConsumerFactory } from './delivery/webhook/webhook-consumer.factory';
import { WebhookSubscriptionSource } from './delivery/webhook/webhook-subscription.source';
import { OutboxWebhookSubscriptions } from './delivery/webhook/outbox-webhook-subscriptions.service';
import { OutboxSchemaRegistry } from './schemas/outbox-schema.registry';
import { AmbientTransactions } from './cls/ambient-transactions';
import { OutboxInstrumentation } from './observability/outbox-instrumentation';
import { TransportConsumerFactory } from './transport/transport-consumer.factory';
import { BrokerConsumerFactory } from './delivery/broker/broker-consumer.factory';

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
    OutboxAdminService,
    OutboxHealthIndicator,
    OutboxRetention,
    LeaseVacuum,
    WebhookTargetGuard,
    SubscriptionSecretCipher,
    WebhookTransport,
    OutboxWebhookService,
    WebhookConsumerFactory,
    WebhookSubscriptionSource,
    OutboxWebhookSubscriptions,
    OutboxSchemaRegistry,
    AmbientTransactions,
    OutboxInstrumentation,
    TransportConsumerFactory,
    BrokerConsumerFactory,
  ],
  exports: [
    OutboxService,
    OutboxConsumerRegistry,
    OutboxRelay,
    OutboxAdminService,
    OutboxHealthIndicator,
    OutboxRetention,
    OutboxWebhookService,
    OutboxWebhookSubscriptions,
    OutboxInstrumentation,
    // for the board, metrics, tracing and inbox modules (internal: not exported by the package's index)
    OutboxStore,
    OUTBOX_RESOLVED_OPTIONS,
    AmbientTransactions,
  ],
})
export class OutboxModule extends ConfigurableOutboxModule {}
