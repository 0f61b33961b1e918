export type {
  OutboxTransport,
  OutboxTransportBatch,
  OutboxTransportDelivery,
  OutboxTransportOutcome,
} from '../model/outbox-transport.interface';
export type { OutboxTransportOptions } from './outbox-transport-options.interface';
export { TRANSPORT_ERROR_CODES } from './transport-batch';
export { BROKER_ERROR_CODES } from './broker-error-codes';
export type {
  OutboxBrokerOptions,
  OutboxBrokerCommonOptions,
  OutboxRabbitMqBrokerOptions,
  OutboxNatsBrokerOptions,
  OutboxRabbitMqBrokerSettings,
  OutboxNatsBrokerSettings,
} from './outbox-broker-options.interface';
export { OutboxBrokersModule } from './outbox-brokers.module';
export type { OutboxBrokersModuleOptions } from './outbox-brokers-module-options.interface';
