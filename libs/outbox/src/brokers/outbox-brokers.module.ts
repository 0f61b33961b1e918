import { Module } from '@nestjs/common';
import { ConfigurableOutboxBrokersModule } from './outbox-brokers.module-definition';
import { TransportConsumerFactory } from './transport-consumer.factory';
import { BrokerConsumerFactory } from './broker-consumer.factory';

/**
 * RabbitMQ and NATS JetStream forwarders (`brokers`) and your own transports (`transports`), each a consumer of
 * the outbox. Import with `OutboxBrokersModule.forRoot(options)` or `forRootAsync(…)` next to `OutboxModule`,
 * which it needs. Its option problems fail `app.init()` with the core's, in one error.
 */
@Module({
  providers: [TransportConsumerFactory, BrokerConsumerFactory],
  exports: [BrokerConsumerFactory],
})
export class OutboxBrokersModule extends ConfigurableOutboxBrokersModule {}
