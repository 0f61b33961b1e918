import type { OutboxInboxMessage } from './outbox-inbox.interfaces';
import { OUTBOX_MESSAGE_HEADERS } from '../model/message-headers';

/** What the inbox uses of a JetStream message (`JsMsg` of `@nats-io/jetstream`); typed here, so it stays optional. */
export interface JetStreamInboxSource {
  headers?: { get(name: string): string } | undefined;
  info: { deliveryCount: number };
  json<T>(): T;
  ack(): void;
  nak(millis?: number): void;
  term(): void;
}

/**
 * A JetStream message for `OutboxInbox.handle`: id from `Nats-Msg-Id`, delivery count from the server (every
 * delivery counts, an ack wait that ran out included); ack; retry = nak with the delay; dead-letter = term (the
 * server never delivers it again; an advisory `$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED` tells who listens).
 * Keep the consumer's `max_deliver` above the inbox's `maxDeliveries` (it bounds the deliveries that never
 * reached the handler: crashes, a database that refused the record), and its `ack_wait` above the handler's
 * longest run.
 */
export function jetStreamInboxMessage(message: JetStreamInboxSource): OutboxInboxMessage {
  const header = (name: string): string | undefined => message.headers?.get(name) || undefined;
  return {
    id: header(OUTBOX_MESSAGE_HEADERS.natsMessageId),
    header,
    deliveryCount: message.info.deliveryCount,
    payload: () => message.json(),
    ack: () => message.ack(),
    retry: (delayMs) => message.nak(delayMs),
    deadLetter: () => message.term(),
  };
}
