import { messages } from '../errors/outbox.messages';
import type { OutboxNatsBrokerOptions, OutboxRabbitMqBrokerOptions } from './outbox-broker-options.interface';
import type { OutboxEvent } from '../model/outbox-event.interface';

/** The RabbitMQ settings of a `brokers` entry, checked (problems pushed to `problems`). */
export function rabbitMqSettings(
  raw: Partial<Record<keyof OutboxRabbitMqBrokerOptions, unknown>>,
  where: string,
  problems: string[],
): {
  url: string;
  exchange: string;
  exchangeType: string;
  topology: 'assert' | 'check';
  routingKey: (event: OutboxEvent) => string;
} {
  const url = typeof raw.url === 'string' && URL.canParse(raw.url) ? new URL(raw.url) : null;
  if (!url || (url.protocol !== 'amqp:' && url.protocol !== 'amqps:'))
    problems.push(messages.badOption(`${where}.url`, 'an amqp: or amqps: URL', raw.url));
  if (typeof raw.exchange !== 'string' || raw.exchange.length === 0 || Buffer.byteLength(raw.exchange) > 255)
    problems.push(
      messages.badOption(`${where}.exchange`, 'an exchange name of 1 to 255 bytes', raw.exchange),
    );
  const exchangeType = raw.exchangeType ?? 'topic';
  if (!['topic', 'direct', 'fanout', 'headers'].includes(exchangeType as string))
    problems.push(
      messages.badOption(`${where}.exchangeType`, '"topic", "direct", "fanout" or "headers"', exchangeType),
    );
  const topology = raw.topology ?? 'assert';
  if (topology !== 'assert' && topology !== 'check')
    problems.push(messages.badOption(`${where}.topology`, '"assert" or "check"', topology));
  return {
    url: String(raw.url),
    exchange: String(raw.exchange),
    exchangeType: exchangeType as string,
    topology: topology === 'check' ? 'check' : 'assert',
    routingKey: destinationFunction(raw.routingKey, `${where}.routingKey`, problems),
  };
}

/** The NATS settings of a `brokers` entry, checked (problems pushed to `problems`). */
export function natsSettings(
  raw: Partial<Record<keyof OutboxNatsBrokerOptions, unknown>>,
  where: string,
  problems: string[],
): {
  servers: string[];
  stream: string | null;
  subject: (event: OutboxEvent) => string;
  connectionOptions: Readonly<Record<string, unknown>>;
} {
  const servers = typeof raw.servers === 'string' ? [raw.servers] : raw.servers;
  if (
    !Array.isArray(servers) ||
    servers.length === 0 ||
    servers.some((s) => typeof s !== 'string' || s.length === 0)
  )
    problems.push(
      messages.badOption(
        `${where}.servers`,
        'a server URL or a non-empty array of them ("nats://host:4222")',
        raw.servers,
      ),
    );
  const stream = raw.stream ?? null;
  if (stream !== null && (typeof stream !== 'string' || !/^[^\s.*>/\\]{1,255}$/.test(stream)))
    problems.push(
      messages.badOption(
        `${where}.stream`,
        'a JetStream stream name (no spaces, ".", "*", ">", "/" or "\\")',
        stream,
      ),
    );
  const connectionOptions = raw.connectionOptions ?? {};
  if (connectionOptions === null || typeof connectionOptions !== 'object' || Array.isArray(connectionOptions))
    problems.push(
      messages.badOption(
        `${where}.connectionOptions`,
        'an object of NATS connect() options',
        connectionOptions,
      ),
    );
  return {
    servers: Array.isArray(servers) ? servers.map(String) : [],
    stream: typeof stream === 'string' ? stream : null,
    subject: destinationFunction(raw.subject, `${where}.subject`, problems),
    connectionOptions: connectionOptions as Readonly<Record<string, unknown>>,
  };
}

/** The function given, or the default destination: the event name. */
function destinationFunction(
  raw: unknown,
  field: string,
  problems: string[],
): (event: OutboxEvent) => string {
  if (raw === undefined) return (event) => event.eventName;
  if (typeof raw !== 'function') {
    problems.push(messages.badOption(field, 'a function (event) => string', raw));
    return (event) => event.eventName;
  }
  return raw as (event: OutboxEvent) => string;
}

/** AMQP routing keys: up to 255 bytes (empty is allowed, e.g. for a fanout exchange). */
export function isRoutingKey(value: string): boolean {
  return Buffer.byteLength(value) <= 255;
}

/** A NATS subject to publish to: dot-separated non-empty tokens, no spaces, no wildcards. */
export function isSubject(value: string): boolean {
  return /^[^\s.*>]+(\.[^\s.*>]+)*$/.test(value) && value.length <= 1024;
}
