import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ConfigurableOutboxModule, OUTBOX_RESOLVED_OPTIONS } from './options/outbox.module-definition';
import { outboxOptionsProviders } from './options/outbox-options.provider';
import { OutboxService } from './enqueue/outbox.service';
import { OutboxExplorer } from './consumers/outbox.explorer';
import { OutboxConsumerRegistry } from './consumers/outbox-consumer.registry';
import { OutboxRelay } from './relay/outbox.relay';
import { OutboxWakeup } from './enqueue/outbox-wakeup';
import { InProcessDispatcher } from './batch/in-process.dispatcher';
import { ExternalDispatcher } from './batch/external.dispatcher';
import { OutboxStore } from './store/outbox.store';
import { OutboxAdminService } from './admin/outbox-admin.service';
import { OutboxHealthIndicator } from './admin/outbox.health-indicator';
import { OutboxRetention } from './maintenance/outbox.retention';
import { LeaseVacuum } from './maintenance/lease-vacuum';
import { OutboxWebhookService } from './webhooks/outbox-webhook.service';
import { WebhookTransport } from './webhooks/webhook.transport';
import { WebhookTargetGuard } from './webhooks/webhook-target-guard';
import { SubscriptionSecretCipher } from './webhooks/subscription-secret-cipher';
import { WebhookConsumerFactory } from './webhooks/webhook-consumer.factory';
import { WebhookSubscriptionSource } from './webhooks/webhook-subscription.source';
import { OutboxWebhookSubscriptions } from './webhooks/outbox-webhook-subscriptions.service';
import { OutboxSchemaRegistry } from './events/outbox-schema.registry';
import { AmbientTransactions } from './cls/ambient-transactions';
import { OutboxInstrumentation } from './extension/outbox-instrumentation';
import { TransportConsumerFactory } from './brokers/transport-consumer.factory';
import { BrokerConsumerFactory } from './brokers/broker-consumer.factory';

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
