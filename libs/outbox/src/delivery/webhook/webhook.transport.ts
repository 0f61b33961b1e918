import { Injectable } from '@nestjs/common';
import type { ClaimedDelivery } from '../claimed-delivery';
import type { WebhookEndpoint } from './webhook-endpoint';
import { WEBHOOK_HEADERS } from './webhook-headers';
import type { WebhookResponse } from './webhook-outcome';
import { signWebhook } from './webhook-signature';
import { OutboxInstrumentation } from '../../observability/outbox-instrumentation';

/** The response body read at most (for `ok: false`, the run id and error text); the rest is discarded. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const USER_AGENT = 'nestjs-pg-outbox-webhooks/1';

/**
 * POSTs one webhook request with Node's built-in fetch. One `AbortSignal.timeout(timeoutMs)` covers the
 * connection, the status and the (bounded) response body. Redirects are not followed: a signed request is
 * meant for the URL it was configured with. Never throws.
 */
@Injectable()
export class WebhookTransport {
  constructor(private readonly instrumentation: OutboxInstrumentation) {}

  /** Sends `body` for this delivery and reports what came back. */
  async post(endpoint: WebhookEndpoint, delivery: ClaimedDelivery, body: string): Promise<WebhookResponse> {
    const timestamp = Math.floor(Date.now() / 1000);
    const headers: Record<string, string> = {
      ...endpoint.headers,
      // instrumentation: traceparent of the attempt's span, when tracing is on
      ...(this.instrumentation.active ? this.instrumentation.outgoingHeaders() : {}),
      'content-type': 'application/json',
      'user-agent': endpoint.headers['user-agent'] ?? USER_AGENT,
      [WEBHOOK_HEADERS.id]: delivery.event.eventId,
      [WEBHOOK_HEADERS.timestamp]: String(timestamp),
      [WEBHOOK_HEADERS.attempt]: String(delivery.attempt),
      [WEBHOOK_HEADERS.eventName]: delivery.event.eventName,
    };
    if (endpoint.secretKey)
      headers[WEBHOOK_HEADERS.signature] = signWebhook(
        endpoint.secretKey,
        delivery.event.eventId,
        timestamp,
        body,
      );
    const signal = AbortSignal.timeout(endpoint.timeoutMs);
    try {
      const response = await fetch(endpoint.url, {
        method: 'POST',
        headers,
        body,
        redirect: 'manual',
        signal,
      });
      const text = await readBounded(response);
      return {
        kind: 'response',
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
        body: text,
      };
    } catch (error) {
      if (signal.aborted) return { kind: 'timeout', timeoutMs: endpoint.timeoutMs };
      return {
        kind: 'connectionError',
        detail: `POST ${endpoint.displayUrl} failed: ${describeFetchError(error)}`,
      };
    }
  }
}

async function readBounded(response: Response): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < MAX_RESPONSE_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    // Frees the connection without reading an endless body.
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8');
}

/** `fetch failed` says little: the cause carries the system error (ECONNREFUSED, ENOTFOUND, a TLS error…). */
// Duck-typed: undici's errors may come from another realm (e.g. under jest), where `instanceof Error` fails.
function describeFetchError(error: unknown): string {
  const { message, cause } = (error ?? {}) as {
    message?: unknown;
    cause?: { code?: unknown; message?: unknown };
  };
  if (cause && typeof cause.message === 'string')
    return `${typeof cause.code === 'string' ? `${cause.code} ` : ''}${cause.message}`;
  return typeof message === 'string' ? message : String(error);
}
