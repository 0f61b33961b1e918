export { OutboxInboxModule } from './outbox-inbox.module';
export { OutboxInbox } from './outbox-inbox.service';
export { InboxHandler, InboxContext } from './inbox-handler.decorator';
export { OutboxInboxInterceptor } from './outbox-inbox.interceptor';
export { OUTBOX_MESSAGE_HEADERS } from '../model/message-headers';
export { amqpInboxMessage, type AmqpInboxSource, type AmqpInboxChannel } from './amqp-inbox-message';
export { jetStreamInboxMessage, type JetStreamInboxSource } from './jetstream-inbox-message';
export {
  OutboxRmqDeserializer,
  OutboxNatsDeserializer,
  type OutboxIncomingPacket,
  type NatsIncomingMessage,
} from './nest-deserializers';
export type {
  OutboxInboxMessage,
  OutboxInboxContext,
  OutboxInboxHandler,
  OutboxInboxOutcome,
  OutboxInboxConsumerOptions,
} from './outbox-inbox.interfaces';
export type { OutboxInboxModuleOptions } from './outbox-inbox-options.interface';
