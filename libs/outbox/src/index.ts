export { OutboxModule } from './outbox.module';
export { outboxMigrations } from './migrations';
export { outboxMigrationsFor } from './migrations/outbox-migrations.factory';
export { OutboxService } from './enqueue/outbox.service';
export { EVENT_NAME_PATTERN } from './model/event-validation';
export { OnOutboxEvent } from './consumers/on-outbox-event.decorator';
export type {
  OutboxEventMap,
  OutboxStrictEventNames,
  OutboxVersioned,
  OutboxKnownEventName,
  OutboxPayloadOf,
  OutboxEventOf,
} from './model/outbox-event-map.interface';
export {
  defineOutboxEvents,
  type OutboxEventSchemas,
  type OutboxEventMapOf,
} from './model/outbox-event-schemas';
export type { StandardSchemaV1 } from './model/standard-schema';
export { OutboxConsumerRegistry, type TenantConsumerSource } from './consumers/outbox-consumer.registry';
export type { OutboxConsumer } from './model/outbox-consumer';
export { OutboxRelay } from './relay/outbox.relay';
export { OutboxRetention } from './maintenance/outbox.retention';
export {
  OutboxError,
  OutboxValidationError,
  OutboxConfigurationError,
  OutboxHandlerTimeoutError,
  OutboxInvalidPayloadError,
  OutboxStallError,
} from './errors/outbox.error';
export type { OutboxRelayStall } from './model/outbox-relay-stall.interface';
export { OUTBOX_DEFAULTS } from './options/outbox-options';
export { SINGLE_TENANT_ID, DEFAULT_TENANT_SETTING } from './model/outbox.constants';
export type {
  OutboxModuleOptions,
  OutboxRelayOptions,
  OutboxWakeUps,
  OutboxBackoffOptions,
  OutboxRegistryOptions,
  OutboxRetentionOptions,
} from './options/outbox-module-options.interface';
export type { OnOutboxEventOptions, OutboxStartFrom } from './model/outbox-handler-options.interface';
export type {
  OutboxEvent,
  OutboxEventInput,
  OutboxHandlerContext,
  OutboxJson,
} from './model/outbox-event.interface';
