/**
 * Request headers of a webhook. `webhook-id`, `webhook-timestamp` and `webhook-signature` follow the Standard
 * Webhooks specification (standardwebhooks.com); the `outbox-*` ones are this library's own.
 */
export const WEBHOOK_HEADERS = {
  /** The event id: the same on every attempt, for the receiver's deduplication. */
  id: 'webhook-id',
  /** Unix time in seconds when this attempt was signed and sent. */
  timestamp: 'webhook-timestamp',
  /** `v1,<base64 HMAC-SHA256>` (space-separated when there are several). Only with a secret. */
  signature: 'webhook-signature',
  /** 1-based attempt number of this delivery. */
  attempt: 'outbox-attempt',
  /** The event name, to route without parsing the body. */
  eventName: 'outbox-event-name',
} as const;

/** Response header a receiver may set to give its own id for the delivery (kept as `external_run_id`). */
export const WEBHOOK_RUN_ID_HEADER = 'x-run-id';

/** Header names a webhook's own `headers` may not set (lowercase; `outbox-` and `webhook-` are reserved prefixes). */
export function isReservedWebhookHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    lower.startsWith('webhook-') ||
    lower.startsWith('outbox-') ||
    ['content-type', 'content-length', 'host', 'transfer-encoding', 'connection'].includes(lower)
  );
}
