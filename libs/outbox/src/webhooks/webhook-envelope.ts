import type { OutboxEvent, OutboxJson } from '../model/outbox-event.interface';
import { serialisePayload } from '../model/event-validation';
import { OutboxError } from '../errors/outbox.error';

/**
 * The JSON body of every webhook request: only these fields, in this order. Internal columns (status, attempts,
 * sequence, delivery ids) never reach the receiver.
 */
export interface OutboxWebhookEnvelope<TData = OutboxJson> {
  /** The event's UUID; also sent as the `webhook-id` header. The same on every attempt: dedup on it. */
  eventId: string;
  eventName: string;
  tenantId: string;
  /** ISO 8601, UTC, millisecond precision. */
  occurredAt: string;
  correlationId: string | null;
  /** Null when the event names no aggregate. */
  aggregate: { type: string | null; id: string | null } | null;
  schemaVersion: number;
  data: TData;
}

/** An event that cannot be turned into a wire body; its delivery is dead with `malformedPayload`. */
export class WebhookEnvelopeError extends OutboxError {}

/** The envelope of an event, checked field by field. Throws {@link WebhookEnvelopeError}. */
export function toWebhookEnvelope(event: OutboxEvent): OutboxWebhookEnvelope {
  const text = (field: string, value: unknown): string => {
    if (typeof value !== 'string' || value.length === 0)
      throw new WebhookEnvelopeError(`${field} is not a non-empty string`);
    return value;
  };
  const optional = (field: string, value: unknown): string | null =>
    value === null || value === undefined ? null : text(field, value);
  if (!(event.occurredAt instanceof Date) || !Number.isFinite(event.occurredAt.getTime())) {
    throw new WebhookEnvelopeError('occurredAt is not a valid date');
  }
  if (!Number.isSafeInteger(event.schemaVersion) || event.schemaVersion < 1) {
    throw new WebhookEnvelopeError(`schemaVersion ${String(event.schemaVersion)} is not a positive integer`);
  }
  const aggregateType = optional('aggregateType', event.aggregateType);
  const aggregateId = optional('aggregateId', event.aggregateId);
  return {
    eventId: text('eventId', event.eventId),
    eventName: text('eventName', event.eventName),
    tenantId: text('tenantId', event.tenantId),
    occurredAt: event.occurredAt.toISOString(),
    correlationId: optional('correlationId', event.correlationId),
    aggregate:
      aggregateType === null && aggregateId === null ? null : { type: aggregateType, id: aggregateId },
    schemaVersion: event.schemaVersion,
    data: event.data,
  };
}

/**
 * The request body of an event. A payload JSON would silently change is refused (e.g. a jsonb number such as
 * 1e400 that JavaScript reads as Infinity and JSON would send as null), with the path of the bad value.
 */
export function webhookBody(event: OutboxEvent): string {
  const envelope = toWebhookEnvelope(event);
  try {
    serialisePayload(envelope.data, 'data', Number.MAX_SAFE_INTEGER);
  } catch (error) {
    throw new WebhookEnvelopeError((error as Error).message);
  }
  return JSON.stringify(envelope);
}
