import type { OutboxBackoffOptions } from '../interfaces/outbox-module-options.interface';

/** Options of `OutboxInboxModule.forRoot()`. */
export interface OutboxInboxModuleOptions {
  /**
   * Deliveries of one message before it is dead-lettered (RabbitMQ: nack without requeue, to the queue's
   * dead-letter exchange; JetStream: term), the inbox row marked `dead`. Default: `5`.
   */
  maxDeliveries?: number;
  /**
   * Delay before a failed message is delivered again, growing with its delivery number: JetStream's nak delay;
   * on RabbitMQ the nack (with requeue) waits that long. Default: `{ baseMs: 1000, capMs: 60000, jitter: 0.2 }`.
   */
  redelivery?: OutboxBackoffOptions;
  /** Register `OutboxInbox` for every module (the `@InboxHandler` interceptor finds it from any). Default: `true`. */
  isGlobal?: boolean;
}

/** The inbox options after defaults were merged and checked. */
export interface ResolvedInboxOptions {
  maxDeliveries: number;
  redelivery: Required<OutboxBackoffOptions>;
}
