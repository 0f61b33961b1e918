import type { OutboxTransportDelivery } from '../../transport/outbox-transport.interface';

/**
 * Headers of every message a forwarder publishes (RabbitMQ message headers, NATS headers). The message id is
 * the outbox event id: AMQP's `messageId` property, JetStream's `Nats-Msg-Id`. An inbox on the other side reads
 * the tenant from `x-outbox-tenant`. Headers without a value (no aggregate, no correlation id) are left out.
 */
export const BROKER_HEADERS = {
  /** The event name. */
  eventName: 'x-outbox-event',
  /** The tenant id (UUID). */
  tenant: 'x-outbox-tenant',
  /** `<aggregateType>:<aggregateId>` (the type may be empty). */
  aggregate: 'x-outbox-aggregate',
  correlationId: 'x-outbox-correlation-id',
  /** The payload's schema version (a positive integer, as text). */
  schemaVersion: 'x-outbox-schema-version',
  /** 1-based attempt number of this delivery (above 1: a retry, possibly a duplicate). */
  attempt: 'x-outbox-attempt',
} as const;

/** The headers of a delivery's message: the outbox's own, after those the instrumentation asked for. */
export function brokerHeaders(delivery: OutboxTransportDelivery): Record<string, string> {
  const { event } = delivery;
  const headers: Record<string, string> = {
    ...delivery.headers,
    [BROKER_HEADERS.eventName]: event.eventName,
    [BROKER_HEADERS.tenant]: event.tenantId,
    [BROKER_HEADERS.schemaVersion]: String(event.schemaVersion),
    [BROKER_HEADERS.attempt]: String(delivery.attempt),
  };
  if (event.aggregateId !== null)
    headers[BROKER_HEADERS.aggregate] = `${event.aggregateType ?? ''}:${event.aggregateId}`;
  if (event.correlationId !== null) headers[BROKER_HEADERS.correlationId] = event.correlationId;
  return headers;
}
