import { OUTBOX_MESSAGE_HEADERS } from '../model/message-headers';

/** A packet as Nest's microservice servers route it (`ConsumerDeserializer`'s result, typed here). */
export interface OutboxIncomingPacket {
  pattern: unknown;
  data: unknown;
  id?: string;
}

/** What the NATS deserializer uses of a core NATS message (`Msg` of `@nats-io/transport-node`). */
export interface NatsIncomingMessage {
  headers?: { get(name: string): string } | undefined;
  reply?: string;
  json<T>(): T;
  string(): string;
  respond(data?: string): boolean;
}

/**
 * Where `OutboxNatsDeserializer` leaves the raw message for the inbox interceptor: on its headers object, the one
 * Nest's NatsContext holds (Nest gives the interceptor no other way to reach the message's reply subject).
 */
export const NATS_RAW_MESSAGE = Symbol('outbox.inbox.natsMessage');

/**
 * `deserializer` of Nest's RMQ transport for messages an outbox forwarder sent: routes each by its
 * `x-outbox-event` header to the `@EventPattern` of that event name, and gives the handler the whole JSON body
 * (the event envelope) as `@Payload()`. Other messages are read as Nest's own deserializer reads them.
 */
export class OutboxRmqDeserializer {
  deserialize(value: unknown, options?: { headers?: Record<string, unknown> }): OutboxIncomingPacket {
    const event = options?.headers?.[OUTBOX_MESSAGE_HEADERS.event];
    if (typeof event === 'string' && event.length > 0) return { pattern: event, data: value };
    return nestPacket(value, undefined);
  }
}

/**
 * `deserializer` of Nest's NATS transport for messages an outbox forwarder sent: gives the handler the whole JSON
 * body (the event envelope) as `@Payload()`, and lets `@InboxHandler` acknowledge a message that a JetStream push
 * consumer delivered (nak with a delay, term). Other messages are read as Nest's own deserializer reads them.
 */
export class OutboxNatsDeserializer {
  deserialize(message: NatsIncomingMessage, options?: { channel?: string }): OutboxIncomingPacket {
    if (message.headers)
      Object.defineProperty(message.headers, NATS_RAW_MESSAGE, { value: message, configurable: true });
    let value: unknown;
    try {
      value = message.json();
    } catch {
      value = message.string();
    }
    if (message.headers?.get(OUTBOX_MESSAGE_HEADERS.event)) return { pattern: options?.channel, data: value };
    return nestPacket(value, options?.channel);
  }
}

/** Nest's own rule: an object with `pattern` or `data` is a packet; anything else is an external message's data. */
function nestPacket(value: unknown, channel: string | undefined): OutboxIncomingPacket {
  if (value !== null && typeof value === 'object' && ('pattern' in value || 'data' in value))
    return value as OutboxIncomingPacket;
  return { pattern: channel, data: value };
}
