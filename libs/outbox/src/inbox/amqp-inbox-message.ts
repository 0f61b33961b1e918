import type { OutboxInboxMessage } from './outbox-inbox.interfaces';

/** What the inbox reads of an amqplib message (`ConsumeMessage`); typed here, so amqplib stays optional. */
export interface AmqpInboxSource {
  content: Uint8Array;
  fields: { redelivered: boolean };
  properties: { messageId?: unknown; headers?: Record<string, unknown> | undefined };
}

/** What the inbox uses of an amqplib `Channel` (the one the message was consumed on). */
export interface AmqpInboxChannel<TMessage> {
  ack(message: TMessage): void;
  nack(message: TMessage, allUpTo?: boolean, requeue?: boolean): void;
}

/**
 * An amqplib message for `OutboxInbox.handle`, settled on its channel: ack; retry = nack with requeue after the
 * delay (the message stays unacknowledged meanwhile, so it holds a prefetch slot); dead-letter = nack without
 * requeue, which sends it to the queue's dead-letter exchange (dropped when the queue has none).
 *
 * Delivery count (`context.deliveryCount`, and the pace of redeliveries the database refused): quorum queues send
 * `x-delivery-count` (returns so far, a crash of the consumer included); classic queues only flag a redelivery
 * (null then). The dead-letter decision does not depend on it: the inbox counts the handler's failed runs itself.
 * Bound crashes with a quorum queue's `x-delivery-limit`.
 */
export function amqpInboxMessage<TMessage extends AmqpInboxSource>(
  channel: AmqpInboxChannel<TMessage>,
  message: TMessage,
): OutboxInboxMessage {
  const headers = message.properties.headers ?? {};
  const redeliveries = integer(headers['x-delivery-count']);
  return {
    id: headerText(message.properties.messageId),
    header: (name) => headerText(headers[name]),
    deliveryCount: redeliveries !== undefined ? redeliveries + 1 : message.fields.redelivered ? null : 1,
    payload: () => JSON.parse(Buffer.from(message.content).toString('utf8')),
    ack: () => channel.ack(message),
    retry: (delayMs) => {
      const requeue = (): void => {
        try {
          channel.nack(message, false, true);
        } catch {
          // the channel closed meanwhile: the broker requeued the message itself
        }
      };
      if (delayMs <= 0) return requeue();
      setTimeout(requeue, delayMs).unref();
    },
    deadLetter: () => channel.nack(message, false, false),
  };
}

/** A header value as text (amqplib gives strings, numbers, or Buffers for byte arrays). */
function headerText(value: unknown): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
  return undefined;
}

function integer(value: unknown): number | undefined {
  const n = typeof value === 'bigint' ? Number(value) : typeof value === 'string' ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}
