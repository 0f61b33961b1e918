import { Logger } from '@nestjs/common';
import type { OutboxTransportOutcome } from '../model/outbox-transport.interface';
import { errorText } from '../errors/error-text';
import { BROKER_ERROR_CODES } from './broker-error-codes';
import { BrokerLink, BrokerUnavailableError } from './broker-link';
import type { BrokerMessage, BrokerPublisher } from './broker-forwarder';
import { acknowledged, displayUrl, withTimeout } from './broker-wait';

/** What the forwarder uses of amqplib (typed here: the package's declarations never name the optional peer). */
export interface AmqpLibLike {
  connect(url: string, socketOptions?: Record<string, unknown>): Promise<AmqpConnectionLike>;
}
interface AmqpConnectionLike {
  createConfirmChannel(): Promise<AmqpConfirmChannelLike>;
  close(): Promise<void>;
  on(event: 'close' | 'error' | 'blocked' | 'unblocked', listener: (arg?: unknown) => void): unknown;
}
interface AmqpConfirmChannelLike {
  assertExchange(name: string, type: string, options: { durable: boolean }): Promise<unknown>;
  checkExchange(name: string): Promise<unknown>;
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Record<string, unknown>,
    callback: (error: unknown) => void,
  ): boolean;
  on(event: 'close' | 'error' | 'drain', listener: (arg?: unknown) => void): unknown;
  on(event: 'return', listener: (message: { properties: { messageId?: string } }) => void): unknown;
  once(event: 'drain' | 'close', listener: () => void): unknown;
  removeListener(event: string, listener: (...args: never[]) => void): unknown;
  close(): Promise<void>;
}

/** Settings of one RabbitMQ forwarder, checked. */
export interface RabbitMqPublisherSettings {
  consumer: string;
  url: string;
  exchange: string;
  exchangeType: string;
  topology: 'assert' | 'check';
  timeoutMs: number;
  reconnect: { baseMs: number; capMs: number };
}

/** One connection and confirm channel, and what the channel returned (unroutable) by message id. */
interface Channel {
  connection: AmqpConnectionLike;
  channel: AmqpConfirmChannelLike;
  returned: Set<string>;
  blocked: string | null;
}

/** `checkExchange` found no exchange: the forwarder's deliveries fail with `exchangeNotFound`. */
class ExchangeNotFound extends Error {}

/**
 * Publishes to one exchange through one connection and one confirm channel: persistent messages, `mandatory`
 * (a returned message is `unroutable`), `messageId` = the event id; a batch's publishes go out back to back and
 * their confirms are awaited together, up to `timeoutMs`. A confirm lost with the channel is `connectionLost`:
 * the broker may hold the message, so it is retried, never recorded as delivered.
 */
export class RabbitMqPublisher implements BrokerPublisher {
  private readonly logger = new Logger(RabbitMqPublisher.name);
  private readonly link: BrokerLink<Channel>;

  constructor(
    private readonly amqp: AmqpLibLike,
    private readonly settings: RabbitMqPublisherSettings,
  ) {
    this.link = new BrokerLink(
      `RabbitMQ of ${settings.consumer}`,
      (lost) => this.open(lost),
      async ({ connection }) => connection.close(),
      settings.reconnect,
    );
  }

  async publish(messages: readonly BrokerMessage[], signal: AbortSignal): Promise<OutboxTransportOutcome[]> {
    let state: Channel;
    try {
      state = await this.link.get();
    } catch (error) {
      const cause = error instanceof BrokerUnavailableError ? error.reason : null;
      if (!(cause instanceof ExchangeNotFound)) throw error;
      const outcome: OutboxTransportOutcome = {
        status: 'failed',
        errorCode: BROKER_ERROR_CODES.exchangeNotFound,
        error: cause.message,
      };
      return messages.map(() => outcome);
    }
    const { exchange, timeoutMs, consumer } = this.settings;
    const confirms: Promise<OutboxTransportOutcome>[] = [];
    const deadline = Date.now() + timeoutMs;
    for (const message of messages) {
      let written: boolean;
      const confirmed = new Promise<unknown>((resolve) => {
        try {
          written = state.channel.publish(
            exchange,
            message.destination,
            message.body,
            {
              persistent: true,
              mandatory: true,
              messageId: message.eventId,
              contentType: 'application/json',
              type: message.delivery.event.eventName,
              timestamp: Math.floor(message.delivery.event.occurredAt.getTime() / 1000),
              headers: message.headers,
            },
            (error) => resolve(error ?? null),
          );
        } catch (error) {
          // the channel closed before this message was written: it never left
          written = false;
          resolve(new NotSent(errorText(error)));
        }
      });
      confirms.push(confirmed.then((error) => this.outcome(state, message, error)));
      if (signal.aborted) break;
      if (!written! && !(await drained(state.channel, deadline))) break;
    }
    // messages never written (the loop stopped early) are settled as not sent
    while (confirms.length < messages.length)
      confirms.push(Promise.resolve(this.notSent(messages[confirms.length]!)));
    return acknowledged(confirms, deadline, signal, (i) => ({
      status: 'failed',
      errorCode: BROKER_ERROR_CODES.publishTimeout,
      error: `${consumer}: RabbitMQ did not confirm event ${messages[i]!.eventId} within ${timeoutMs} ms${
        state.blocked ? ` (the connection is blocked: ${state.blocked})` : ''
      }; it may hold it`,
    }));
  }

  close(): Promise<void> {
    return this.link.close();
  }

  private notSent(message: BrokerMessage, why = 'the batch was cut short'): OutboxTransportOutcome {
    return {
      status: 'deferred',
      errorCode: BROKER_ERROR_CODES.brokerUnavailable,
      error: `${this.settings.consumer}: event ${message.eventId} was not sent (${why})`,
      retryAfterMs: this.settings.reconnect.baseMs,
    };
  }

  private outcome(state: Channel, message: BrokerMessage, error: unknown): OutboxTransportOutcome {
    const { consumer, exchange } = this.settings;
    const returned = state.returned.delete(message.eventId);
    if (error instanceof NotSent) return this.notSent(message, error.message);
    if (error === null && !returned) return { status: 'delivered' };
    if (error === null)
      return {
        status: 'failed',
        errorCode: BROKER_ERROR_CODES.unroutable,
        error: `${consumer}: exchange "${exchange}" returned event ${message.eventId}: no queue is bound for routing key "${message.destination}"`,
      };
    const text = errorText(error);
    if (/nack/i.test(text))
      return {
        status: 'failed',
        errorCode: BROKER_ERROR_CODES.publishNacked,
        error: `${consumer}: RabbitMQ refused event ${message.eventId} (nack)`,
      };
    return {
      status: 'failed',
      errorCode: BROKER_ERROR_CODES.connectionLost,
      error: `${consumer}: the connection closed before RabbitMQ confirmed event ${message.eventId} (${text}); it may hold it`,
    };
  }

  private async open(lost: () => void): Promise<Channel> {
    const { url, consumer, timeoutMs, exchange, exchangeType, topology } = this.settings;
    const connection = await withTimeout(
      this.amqp.connect(url, {
        timeout: timeoutMs,
        clientProperties: { connection_name: `nestjs-pg-outbox ${consumer}` },
      }),
      timeoutMs,
      `connecting to ${displayUrl(url)}`,
      (late) => late.close().catch(() => undefined),
    );
    const state: Channel = { connection, channel: null!, returned: new Set(), blocked: null };
    connection.on('error', (error) => this.logger.warn(`${consumer}: connection error: ${errorText(error)}`));
    connection.on('close', () => lost());
    connection.on('blocked', (reason) => (state.blocked = String(reason)));
    connection.on('unblocked', () => (state.blocked = null));
    try {
      const channel = await withTimeout(connection.createConfirmChannel(), timeoutMs, 'opening a channel');
      state.channel = channel;
      channel.on('error', (error) => this.logger.warn(`${consumer}: channel error: ${errorText(error)}`));
      channel.on('close', () => {
        lost();
        // a connection without its channel is of no use: the next batch opens both again
        void connection.close().catch(() => undefined);
      });
      channel.on('return', (message) => {
        if (message.properties.messageId) state.returned.add(message.properties.messageId);
      });
      if (topology === 'assert') {
        await channel.assertExchange(exchange, exchangeType, { durable: true });
      } else {
        await channel.checkExchange(exchange).catch((error: unknown) => {
          throw new ExchangeNotFound(
            `${consumer}: exchange "${exchange}" does not exist (topology: 'check'): declare it, or let the forwarder (topology: 'assert'); ${errorText(error)}`,
          );
        });
      }
    } catch (error) {
      await connection.close().catch(() => undefined);
      throw error;
    }
    this.logger.log(`${consumer}: connected to ${displayUrl(url)}, exchange "${exchange}"`);
    return state;
  }
}

/** A publish that threw: the message never left. */
class NotSent extends Error {}

/** Waits for the channel's write buffer to drain; false when it closed or the deadline passed first. */
function drained(channel: AmqpConfirmChannelLike, deadline: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (value: boolean): void => {
      clearTimeout(timer);
      channel.removeListener('drain', onDrain);
      channel.removeListener('close', onClose);
      resolve(value);
    };
    const onDrain = (): void => done(true);
    const onClose = (): void => done(false);
    const timer = setTimeout(() => done(false), Math.max(0, deadline - Date.now()));
    channel.once('drain', onDrain);
    channel.once('close', onClose);
  });
}
