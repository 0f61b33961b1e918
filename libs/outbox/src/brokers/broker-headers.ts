import type { OutboxTransportDelivery } from '../model/outbox-transport.interface';
import { OUTBOX_MESSAGE_HEADERS } from '../model/message-headers';

/**
 * The headers of a delivery's message (RabbitMQ message headers, NATS headers): the instrumentation's (e.g.
 * `traceparent`), then the outbox's own, named in `OUTBOX_MESSAGE_HEADERS` — the names the inbox reads. The
 * message id (AMQP `messageId`, JetStream `Nats-Msg-Id`) is set by each publisher. Headers without a value (no
 * aggregate, no correlation id) are left out.
 */
export function brokerHeaders(delivery: OutboxTransportDelivery): Record<string, string> {
  const { event } = delivery;
  const headers: Record<string, string> = {
    ...delivery.headers,
    [OUTBOX_MESSAGE_HEADERS.event]: event.eventName,
    [OUTBOX_MESSAGE_HEADERS.tenant]: event.tenantId,
    [OUTBOX_MESSAGE_HEADERS.schemaVersion]: String(event.schemaVersion),
    [OUTBOX_MESSAGE_HEADERS.attempt]: String(delivery.attempt),
  };
  if (event.aggregateId !== null)
    headers[OUTBOX_MESSAGE_HEADERS.aggregate] = `${event.aggregateType ?? ''}:${event.aggregateId}`;
  if (event.correlationId !== null) headers[OUTBOX_MESSAGE_HEADERS.correlationId] = event.correlationId;
  return headers;
}
