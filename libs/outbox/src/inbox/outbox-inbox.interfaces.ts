import type { EntityManager } from 'typeorm';

/**
 * A message from a broker, as `OutboxInbox.handle` reads and settles it: what `amqpInboxMessage` and
 * `jetStreamInboxMessage` make of amqplib's and JetStream's messages. Write your own for another broker.
 */
export interface OutboxInboxMessage {
  /** The message id (AMQP `messageId`, JetStream `Nats-Msg-Id`): the outbox event id for an outbox's messages. */
  readonly id: string | undefined;
  /** A header's text value, or undefined when the message does not carry it. */
  header(name: string): string | undefined;
  /** The broker's 1-based delivery number, or null when it does not know it (for the redelivery delay). */
  readonly deliveryCount: number | null;
  /** Whether `retry` makes the broker deliver the message again. Default: true. */
  readonly redeliverable?: boolean;
  /** The payload the handler receives (the JSON body, parsed); a throw dead-letters the message. */
  payload(): unknown;
  /** The message is done with: processed now, or a duplicate. */
  ack(): void | Promise<void>;
  /** The handler failed: deliver the message again after about `delayMs`. */
  retry(delayMs: number): void | Promise<void>;
  /** The message cannot succeed: hand it to the broker's dead-letter handling (or drop it), never redeliver. */
  deadLetter(): void | Promise<void>;
}

/** What the handler of an inbox message receives beside the payload. */
export interface OutboxInboxContext {
  /**
   * An EntityManager inside the transaction that records the message for this consumer: what the handler writes
   * through it commits with that record, once, or rolls back with it when the handler throws.
   */
  readonly manager: EntityManager;
  /** The consumer's name. */
  readonly consumer: string;
  /** The message id as sent. */
  readonly messageId: string;
  /** The tenant set for row-level security in the transaction. */
  readonly tenantId: string;
  /** The event name (`x-outbox-event` header), or null when the message has none. */
  readonly eventName: string | null;
  /** 1-based number of this run of the handler on the message (failed runs are counted in the inbox row). */
  readonly attempt: number;
  /** The broker's 1-based delivery number (crashes and refused deliveries included), or null when it has none. */
  readonly deliveryCount: number | null;
  /** A header of the message, or undefined. */
  header(name: string): string | undefined;
}

/** The function `OutboxInbox.handle` runs in the inbox transaction. */
export type OutboxInboxHandler<TPayload = unknown> = (
  payload: TPayload,
  context: OutboxInboxContext,
) => unknown;

/**
 * What became of a message: `processed` (the handler committed, the message is acknowledged), `duplicate`
 * (processed before: acknowledged, the handler not called), `retry` (the handler failed: handed back for
 * redelivery) or `dead` (dead-lettered: its deliveries are used up, or it cannot be processed at all).
 */
export type OutboxInboxOutcome = 'processed' | 'duplicate' | 'retry' | 'dead';

/** Options of one consumer of the inbox (`OutboxInbox.handle`, `@InboxHandler`). */
export interface OutboxInboxConsumerOptions {
  /** Failed runs of the handler before the message is dead-lettered. Default: the module's `maxDeliveries`. */
  maxDeliveries?: number;
}
