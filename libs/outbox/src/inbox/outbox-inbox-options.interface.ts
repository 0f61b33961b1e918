import type { OutboxBackoffOptions } from '../options/outbox-module-options.interface';

/** Options of `OutboxInboxModule.forRoot()`. */
export interface OutboxInboxModuleOptions {
  /**
   * Runs of a consumer's handler on one message that may fail before the message is dead-lettered (RabbitMQ: nack
   * without requeue, to the queue's dead-letter exchange; JetStream: term), the inbox row marked `dead`. Counted
   * by the inbox, on every broker and queue type: deliveries that never reached the handler (the database refused
   * the record, the consumer crashed) are bounded by the broker's own limit (`x-delivery-limit`, `max_deliver`).
   * Default: `5`.
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
