export { OutboxModule } from './outbox.module';
export { outboxMigrations } from '../../../migrations';
export { OUTBOX_MODULE_OPTIONS } from './outbox.module-definition';
export { OutboxService } from './enqueue/outbox.service';
export { EVENT_NAME_PATTERN, MAX_PAYLOAD_DEPTH } from './enqueue/event-validation';
export { OnOutboxEvent } from './decorators/on-outbox-event.decorator';
export { OutboxConsumerRegistry, type TenantConsumerSource } from './registry/outbox-consumer.registry';
export type { OutboxConsumer, ExternalDeliveryResult } from './registry/outbox-consumer';
export { OutboxRelay } from './relay/outbox.relay';
export type { RelayRoundResult } from './relay/relay-round';
export { OutboxError, OutboxValidationError, OutboxConfigurationError, OutboxHandlerTimeoutError } from './errors/outbox.error';
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
export type { OutboxEvent, OutboxEventInput, OutboxHandlerContext, OutboxJson } from './interfaces/outbox-event.interface';
