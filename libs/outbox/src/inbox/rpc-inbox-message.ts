import { amqpInboxMessage, type AmqpInboxChannel, type AmqpInboxSource } from './amqp-inbox-message';
import { OUTBOX_MESSAGE_HEADERS } from '../model/message-headers';
import { NATS_RAW_MESSAGE, type NatsIncomingMessage } from './nest-deserializers';
import type { OutboxInboxContext, OutboxInboxMessage } from './outbox-inbox.interfaces';

/** What the inbox uses of Nest's `RmqContext` (typed here: `@nestjs/microservices` stays optional). */
interface RmqContextLike {
  getMessage(): AmqpInboxSource;
  getChannelRef(): AmqpInboxChannel<AmqpInboxSource>;
}

/** What the inbox uses of Nest's `NatsContext`. */
interface NatsContextLike {
  getSubject(): string;
  getHeaders(): ({ get(name: string): string } & { [NATS_RAW_MESSAGE]?: NatsIncomingMessage }) | undefined;
}

/**
 * The message of a Nest microservice handler's context, with `data` (what Nest deserialized) as its payload:
 * RabbitMQ through the amqplib message and channel of the `RmqContext`; NATS through the `NatsContext` headers.
 * A NATS message is settled only when a JetStream push consumer delivered it (its reply subject is an ack
 * subject, reachable with `OutboxNatsDeserializer`); a core NATS message cannot be acknowledged or redelivered.
 * Null for any other transport.
 */
export function rpcInboxMessage(context: unknown, data: unknown): OutboxInboxMessage | null {
  if (isRmqContext(context))
    return { ...amqpInboxMessage(context.getChannelRef(), context.getMessage()), payload: () => data };
  if (!isNatsContext(context)) return null;
  const headers = context.getHeaders();
  const header = (name: string): string | undefined => headers?.get(name) || undefined;
  const base = { id: header(OUTBOX_MESSAGE_HEADERS.natsMessageId), header, payload: () => data };
  const raw = headers?.[NATS_RAW_MESSAGE];
  const deliveryCount = raw?.reply ? jetStreamDeliveryCount(raw.reply) : null;
  if (!raw || deliveryCount === null) {
    const nothing = (): void => undefined;
    return {
      ...base,
      deliveryCount: null,
      redeliverable: false,
      ack: nothing,
      retry: nothing,
      deadLetter: nothing,
    };
  }
  // JetStream's acknowledgement protocol, as @nats-io/jetstream's JsMsg speaks it (delay in nanoseconds)
  return {
    ...base,
    deliveryCount,
    ack: () => void raw.respond('+ACK'),
    retry: (delayMs) =>
      void raw.respond(
        delayMs > 0 ? `-NAK ${JSON.stringify({ delay: Math.round(delayMs) * 1_000_000 })}` : '-NAK',
      ),
    deadLetter: () => void raw.respond('+TERM'),
  };
}

/**
 * The delivery count in a JetStream ack subject, or null when `reply` is not one:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>`, or the same with
 * `<domain>.<account hash>` after `$JS.ACK` (and a token at the end) on newer servers.
 */
export function jetStreamDeliveryCount(reply: string): number | null {
  const tokens = reply.split('.');
  if (tokens[0] !== '$JS' || tokens[1] !== 'ACK') return null;
  const at = tokens.length === 9 ? 4 : tokens.length >= 11 ? 6 : -1;
  const count = Number(tokens[at]);
  return Number.isSafeInteger(count) && count >= 1 ? count : null;
}

const INBOX_CONTEXT = Symbol('outbox.inbox.context');

/** Leaves the inbox context on the handler's RPC context object, for `@InboxContext()` (one object per message). */
export function attachInboxContext(rpcContext: object, context: OutboxInboxContext): void {
  Object.defineProperty(rpcContext, INBOX_CONTEXT, { value: context, configurable: true });
}

/** The inbox context `attachInboxContext` left, if any. */
export function inboxContextOf(rpcContext: unknown): OutboxInboxContext | undefined {
  if (rpcContext === null || typeof rpcContext !== 'object') return undefined;
  return (rpcContext as { [INBOX_CONTEXT]?: OutboxInboxContext })[INBOX_CONTEXT];
}

function isRmqContext(value: unknown): value is RmqContextLike {
  const v = value as Partial<RmqContextLike> | null;
  return typeof v?.getMessage === 'function' && typeof v.getChannelRef === 'function';
}

function isNatsContext(value: unknown): value is NatsContextLike {
  const v = value as Partial<NatsContextLike> | null;
  return typeof v?.getSubject === 'function' && typeof v.getHeaders === 'function';
}
