export { OutboxModule } from './outbox.module';
export { outboxMigrations } from './migrations';
export {
  outboxMigrationsFor,
  type OutboxMigrationsOptions,
  type OutboxMigrationClass,
} from './migrations/outbox-migrations.factory';
export { OUTBOX_MODULE_OPTIONS } from './outbox.module-definition';
export { OutboxService, type OutboxTransaction } from './enqueue/outbox.service';
export { EVENT_NAME_PATTERN, MAX_PAYLOAD_DEPTH } from './enqueue/event-validation';
export { OnOutboxEvent, type OutboxHandlerDecorator } from './decorators/on-outbox-event.decorator';
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
} from './interfaces/outbox-event-map.interface';
export {
  defineOutboxEvents,
  type OutboxEventSchemas,
  type OutboxSchemaVersions,
  type OutboxEventMapOf,
} from './schemas/outbox-event-schemas';
export type { StandardSchemaV1 } from './schemas/standard-schema';
export { OutboxConsumerRegistry, type TenantConsumerSource } from './registry/outbox-consumer.registry';
export type { OutboxConsumer, ExternalDeliveryResult } from './registry/outbox-consumer';
export { OutboxRelay } from './relay/outbox.relay';
export type { RelayRoundResult } from './relay/relay-round';
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
export { OUTBOX_MESSAGE_HEADERS } from './inbox/inbox-headers';
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
export type { OutboxRelayStall, OutboxRoundTrip } from './interfaces/outbox-relay-stall.interface';
export { OUTBOX_DEFAULTS } from './outbox-options';
export { SINGLE_TENANT_ID, DEFAULT_TENANT_SETTING } from './outbox.constants';
export type {
  OutboxModuleOptions,
  OutboxRelayOptions,
  OutboxBackoffOptions,
  OutboxRegistryOptions,
  OutboxRetentionOptions,
} from './interfaces/outbox-module-options.interface';
export type { OnOutboxEventOptions } from './interfaces/outbox-handler-options.interface';
export type {
  OutboxEvent,
  OutboxEventInput,
  OutboxHandlerContext,
  OutboxJson,
} from './interfaces/outbox-event.interface';
export { OutboxWebhookService } from './delivery/webhook/outbox-webhook.service';
export { OutboxWebhookSubscriptions } from './delivery/webhook/outbox-webhook-subscriptions.service';
export {
  verifyWebhook,
  generateWebhookSecret,
  type VerifyWebhookOptions,
  type WebhookRequestHeaders,
} from './delivery/webhook/webhook-signature';
export {
  OutboxWebhookVerificationError,
  type WebhookVerificationFailure,
} from './delivery/webhook/webhook-verification.error';
export type { OutboxWebhookEnvelope } from './delivery/webhook/webhook-envelope';
export { WEBHOOK_HEADERS, WEBHOOK_RUN_ID_HEADER } from './delivery/webhook/webhook-headers';
export { WEBHOOK_ERROR_CODES } from './delivery/webhook/webhook-outcome';
export type {
  OutboxTransport,
  OutboxTransportBatch,
  OutboxTransportDelivery,
  OutboxTransportOutcome,
} from './transport/outbox-transport.interface';
export type { OutboxTransportOptions } from './transport/outbox-transport-options.interface';
export { TRANSPORT_ERROR_CODES } from './transport/transport-batch';
export { BROKER_ERROR_CODES } from './delivery/broker/broker-error-codes';
export type {
  OutboxBrokerOptions,
  OutboxBrokerCommonOptions,
  OutboxRabbitMqBrokerOptions,
  OutboxNatsBrokerOptions,
  OutboxRabbitMqBrokerSettings,
  OutboxNatsBrokerSettings,
} from './interfaces/outbox-broker-options.interface';
export type {
  OutboxWebhookOptions,
  OutboxWebhookCircuitBreakerOptions,
  OutboxWebhookSubscriptionsOptions,
  OutboxSecretKey,
  OutboxWebhookSubscriptionInput,
  OutboxWebhookSubscription,
  OutboxWebhookCircuitState,
} from './interfaces/outbox-webhook-options.interface';
