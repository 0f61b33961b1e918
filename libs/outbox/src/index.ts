export { OutboxModule } from './outbox.module';
export { outboxMigrations } from './migrations';
export {
  outboxMigrationsFor,
  type OutboxMigrationsOptions,
  type OutboxMigrationClass,
} from './migrations/outbox-migrations.factory';
export { OUTBOX_MODULE_OPTIONS } from './options/outbox.module-definition';
export { OutboxService, type OutboxTransaction } from './enqueue/outbox.service';
export { EVENT_NAME_PATTERN, MAX_PAYLOAD_DEPTH } from './model/event-validation';
export { OnOutboxEvent, type OutboxHandlerDecorator } from './consumers/on-outbox-event.decorator';
export type {
  OutboxEventMap,
  OutboxStrictEventNames,
  OutboxVersioned,
  OutboxKnownEventName,
  OutboxStrictMode,
  OutboxEventName,
  OutboxEventPattern,
  OutboxPayloadOf,
  OutboxEnqueueInput,
  OutboxNamesMatching,
  OutboxEventOf,
  OutboxHandlerFor,
} from './model/outbox-event-map.interface';
export {
  defineOutboxEvents,
  type OutboxEventSchemas,
  type OutboxSchemaVersions,
  type OutboxEventMapOf,
} from './model/outbox-event-schemas';
export type { StandardSchemaV1 } from './model/standard-schema';
export { OutboxConsumerRegistry, type TenantConsumerSource } from './consumers/outbox-consumer.registry';
export type { OutboxConsumer, ExternalDeliveryResult } from './model/outbox-consumer';
export { OutboxRelay } from './relay/outbox.relay';
export type { RelayRoundResult } from './model/relay-round';
export { OutboxAdminService } from './admin/outbox-admin.service';
export type {
  OutboxStats,
  OutboxBlockedAggregate,
  OutboxConsumerCounts,
  OutboxEventStatus,
  OutboxDeliveryStatus,
  OutboxFailedFilter,
  OutboxFailedEventsQuery,
  OutboxFailedEvent,
  OutboxFailedDelivery,
  OutboxPage,
  OutboxEventDeliveries,
  OutboxDeliveryRecord,
  OutboxInboxCounts,
} from './admin/outbox-admin.interfaces';
export { OutboxAdminModule } from './admin/outbox-admin.module';
export type { OutboxActionOptions, OutboxAuditEntry } from './admin/outbox-admin.interfaces';
export { OutboxBoardModule } from './board/outbox-board.module';
export { OutboxMetricsModule } from './observability/metrics/outbox-metrics.module';
export { OutboxMetrics } from './observability/metrics/outbox-metrics';
export { OutboxTracingModule } from './observability/tracing/outbox-tracing.module';
export type { OutboxTracingModuleOptions } from './observability/tracing/outbox-tracing-options.interface';
export type {
  OutboxMetricsModuleOptions,
  OutboxMetricsRegistry,
} from './observability/metrics/outbox-metrics-options.interface';
export type {
  OutboxBoardModuleOptions,
  OutboxBoardRequest,
  OutboxBoardTenants,
} from './board/outbox-board-options.interface';
export type { OutboxAdminModuleOptions } from './admin/outbox-admin-options.interface';
export { OutboxInboxModule } from './inbox/outbox-inbox.module';
export { OutboxInbox } from './inbox/outbox-inbox.service';
export { InboxHandler, InboxContext } from './inbox/inbox-handler.decorator';
export { OutboxInboxInterceptor } from './inbox/outbox-inbox.interceptor';
export { OUTBOX_MESSAGE_HEADERS } from './model/message-headers';
export { amqpInboxMessage, type AmqpInboxSource, type AmqpInboxChannel } from './inbox/amqp-inbox-message';
export { jetStreamInboxMessage, type JetStreamInboxSource } from './inbox/jetstream-inbox-message';
export {
  OutboxRmqDeserializer,
  OutboxNatsDeserializer,
  type OutboxIncomingPacket,
  type NatsIncomingMessage,
} from './inbox/nest-deserializers';
export type {
  OutboxInboxMessage,
  OutboxInboxContext,
  OutboxInboxHandler,
  OutboxInboxOutcome,
  OutboxInboxConsumerOptions,
} from './inbox/outbox-inbox.interfaces';
export type { OutboxInboxModuleOptions } from './inbox/outbox-inbox-options.interface';
export {
  OutboxHealthIndicator,
  type OutboxHealthOptions,
  type OutboxHealthDetails,
} from './admin/outbox.health-indicator';
export { OutboxRetention, type RetentionRunResult } from './maintenance/outbox.retention';
export {
  OutboxError,
  OutboxValidationError,
  OutboxConfigurationError,
  OutboxHandlerTimeoutError,
  OutboxInvalidPayloadError,
  OutboxStallError,
} from './errors/outbox.error';
export type { OutboxRelayStall, OutboxRoundTrip } from './model/outbox-relay-stall.interface';
export { OUTBOX_DEFAULTS } from './options/outbox-options';
export { SINGLE_TENANT_ID, DEFAULT_TENANT_SETTING } from './model/outbox.constants';
export type {
  OutboxModuleOptions,
  OutboxRelayOptions,
  OutboxBackoffOptions,
  OutboxRegistryOptions,
  OutboxRetentionOptions,
} from './options/outbox-module-options.interface';
export type { OnOutboxEventOptions } from './model/outbox-handler-options.interface';
export type {
  OutboxEvent,
  OutboxEventInput,
  OutboxHandlerContext,
  OutboxJson,
} from './model/outbox-event.interface';
export { OutboxWebhookService } from './webhooks/outbox-webhook.service';
export { OutboxWebhookSubscriptions } from './webhooks/outbox-webhook-subscriptions.service';
export {
  verifyWebhook,
  generateWebhookSecret,
  type VerifyWebhookOptions,
  type WebhookRequestHeaders,
} from './webhooks/webhook-signature';
export {
  OutboxWebhookVerificationError,
  type WebhookVerificationFailure,
} from './webhooks/webhook-verification.error';
export type { OutboxWebhookEnvelope } from './webhooks/webhook-envelope';
export { WEBHOOK_HEADERS, WEBHOOK_RUN_ID_HEADER } from './webhooks/webhook-headers';
export { WEBHOOK_ERROR_CODES } from './webhooks/webhook-outcome';
export type {
  OutboxTransport,
  OutboxTransportBatch,
  OutboxTransportDelivery,
  OutboxTransportOutcome,
} from './model/outbox-transport.interface';
export type { OutboxTransportOptions } from './brokers/outbox-transport-options.interface';
export { TRANSPORT_ERROR_CODES } from './brokers/transport-batch';
export { BROKER_ERROR_CODES } from './brokers/broker-error-codes';
export type {
  OutboxBrokerOptions,
  OutboxBrokerCommonOptions,
  OutboxRabbitMqBrokerOptions,
  OutboxNatsBrokerOptions,
  OutboxRabbitMqBrokerSettings,
  OutboxNatsBrokerSettings,
} from './brokers/outbox-broker-options.interface';
export type {
  OutboxWebhookOptions,
  OutboxWebhookCircuitBreakerOptions,
  OutboxWebhookSubscriptionsOptions,
  OutboxSecretKey,
  OutboxWebhookSubscriptionInput,
  OutboxWebhookSubscription,
  OutboxWebhookCircuitState,
} from './webhooks/outbox-webhook-options.interface';
