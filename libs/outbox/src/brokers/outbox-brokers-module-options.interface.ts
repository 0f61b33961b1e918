import type { OutboxTransportOptions } from './outbox-transport-options.interface';
import type { OutboxBrokerOptions } from './outbox-broker-options.interface';

/**
 * Options of `OutboxBrokersModule.forRoot()` / `forRootAsync()` (`nestjs-pg-outbox/brokers`); both also take
 * `isGlobal` (the module is global unless it is `false`). The module needs `OutboxModule` imported.
 */
export interface OutboxBrokersModuleOptions {
  /**
   * RabbitMQ and NATS JetStream forwarders, each a consumer named `broker:<name>` (docs/brokers.md); their client
   * packages are optional peers, loaded only when a broker of that type is configured. Default: `[]`.
   */
  brokers?: OutboxBrokerOptions[];
  /**
   * Your own ways out (Kafka, SQS, another database…), each a consumer named `transport:<name>` that receives
   * claimed batches (docs/transports.md). Default: `[]`.
   */
  transports?: OutboxTransportOptions[];
}
