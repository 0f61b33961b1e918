import type { OnOutboxEventOptions } from '../model/outbox-handler-options.interface';
import type { OutboxEvent } from '../model/outbox-event.interface';
import type { OutboxBackoffOptions } from '../options/outbox-module-options.interface';
import type { OutboxWebhookCircuitBreakerOptions } from '../webhooks/outbox-webhook-options.interface';

/** What every forwarder has: a name, the events it forwards, and how its deliveries are retried. */
export interface OutboxBrokerCommonOptions {
  /** Unique name (letters, digits, `_`, `.`, `-`; up to 100). Its consumer is named `broker:<name>`. */
  name: string;
  /** The events it forwards: exact names (`crm.contact.created.v1`), prefixes (`crm.contact.*`) or `*`. */
  events: readonly string[];
  /**
   * Publish an aggregate's events in commit order, one in flight per aggregate; a dead delivery blocks its
   * aggregate until replayed. Default: `false`.
   */
  ordered?: boolean;
  /**
   * Time to connect, or for a batch's acknowledgements to come back, in ms; must be below `relay.leaseMs`.
   * Default: `10000`.
   */
  timeoutMs?: number;
  /** Attempts before a delivery is dead. Default: `OutboxModule`'s `maxAttempts`. */
  maxAttempts?: number;
  /** Backoff between attempts; fields left out take `OutboxModule`'s. Default: `OutboxModule`'s `backoff`. */
  backoff?: OutboxBackoffOptions;
  /**
   * Circuit breaker of this forwarder (timeouts and lost connections count), or `false` for none. Default:
   * `{ failureThreshold: 5, cooldownMs: 30000 }`.
   */
  circuitBreaker?: OutboxWebhookCircuitBreakerOptions | false;
  /**
   * Delays between reconnection attempts after the connection failed or dropped, in ms (doubling from `baseMs`
   * up to `capMs`). Meanwhile deliveries are given back (`brokerUnavailable`, no attempt spent).
   * Default: `{ baseMs: 100, capMs: 10000 }`.
   */
  reconnect?: { baseMs?: number; capMs?: number };
  /**
   * At most this many of this forwarder's deliveries in flight at once, across every relay: `global` over all tenants,
   * `perTenant` in each tenant; either or both, as `@OnOutboxEvent`'s. Deliveries over the cap wait, uncharged.
   * Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no cap.
   */
  concurrency?: OnOutboxEventOptions['concurrency'];
  /**
   * At most `limit` of this forwarder's deliveries claimed (each one message published) in any window of `intervalMs` (sliding), across
   * every relay: over all tenants, or in each tenant with `perTenant: true`, or per key with `perKey`, as
   * `@OnOutboxEvent`'s. Deliveries over the limit wait,
   * uncharged. Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no limit.
   */
  rateLimit?: OnOutboxEventOptions['rateLimit'];
}

/** What a RabbitMQ forwarder has besides the common options. */
export interface OutboxRabbitMqBrokerSettings {
  /** A RabbitMQ forwarder. */
  type: 'rabbitmq';
  /** `amqp://` or `amqps://` URL, vhost included (`amqp://user:pass@host:5672/vhost`). */
  url: string;
  /** The exchange messages are published to. */
  exchange: string;
  /** Type of the exchange when the forwarder declares it. Default: `'topic'`. */
  exchangeType?: 'topic' | 'direct' | 'fanout' | 'headers';
  /**
   * `'assert'`: declare the exchange (durable) when connecting. `'check'`: only check that it exists, for apps
   * that own their topology (a missing exchange fails the deliveries with `exchangeNotFound`). Default: `'assert'`.
   */
  topology?: 'assert' | 'check';
  /** Routing key of an event's message. Default: the event name. */
  routingKey?: (event: OutboxEvent) => string;
}

/** What a NATS JetStream forwarder has besides the common options. */
export interface OutboxNatsBrokerSettings {
  /** A NATS JetStream forwarder. */
  type: 'nats';
  /** Server URLs (`nats://127.0.0.1:4222`, or `host:port`). */
  servers: string | readonly string[];
  /**
   * The stream that must store the messages: each publish expects it (a subject another stream captures fails
   * with `unroutable`). Default: none (any stream that captures the subject).
   */
  stream?: string;
  /** Subject of an event's message. Default: the event name. */
  subject?: (event: OutboxEvent) => string;
  /**
   * Extra options for the NATS connection (user, pass, token, tls…), passed to `connect()` as given. Default:
   * none.
   */
  connectionOptions?: Readonly<Record<string, unknown>>;
}

/** A RabbitMQ forwarder: `brokers: [{ type: 'rabbitmq', … }]`, through `amqplib` (an optional peer to install). */
export type OutboxRabbitMqBrokerOptions = OutboxBrokerCommonOptions & OutboxRabbitMqBrokerSettings;

/**
 * A NATS JetStream forwarder: `brokers: [{ type: 'nats', … }]`, through `@nats-io/transport-node` and
 * `@nats-io/jetstream` (optional peers to install).
 */
export type OutboxNatsBrokerOptions = OutboxBrokerCommonOptions & OutboxNatsBrokerSettings;

/** One entry of `OutboxBrokersModule.forRoot({ brokers: [ … ] })`. */
export type OutboxBrokerOptions = OutboxRabbitMqBrokerOptions | OutboxNatsBrokerOptions;
