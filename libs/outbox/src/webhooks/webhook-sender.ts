import { Injectable, type OnModuleDestroy } from '@nestjs/common';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import type { WebhookEndpoint } from './webhook-endpoint';
import { WEBHOOK_HEADERS } from './webhook-headers';
import type { WebhookResponse } from './webhook-outcome';
import { signWebhook } from './webhook-signature';
import { TARGET_REFUSED, WebhookTargetGuard } from './webhook-target-guard';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';

/** The response body read at most (for `ok: false`, the run id and error text); the rest is discarded. */
const MAX_RESPONSE_BYTES = 64 * 1024;
const USER_AGENT = 'nestjs-pg-outbox-webhooks/1';

/**
 * POSTs one webhook request. One `AbortSignal.timeout(timeoutMs)` covers the connection, the status and the
 * (bounded) response body. Redirects are not followed: a signed request is meant for the URL it was configured
 * with. Static webhooks go through Node's built-in fetch; tenant subscriptions through `node:http(s)` agents of
 * their own whose `lookup` is the target guard's, so a socket only ever connects to an address checked after
 * resolution (fetch offers no such hook without undici's own package). Never throws.
 */
@Injectable()
export class WebhookSender implements OnModuleDestroy {
  private readonly httpAgent: HttpAgent;
  private readonly httpsAgent: HttpsAgent;

  constructor(
    private readonly guard: WebhookTargetGuard,
    private readonly instrumentation: OutboxInstrumentation,
  ) {
    // Agents of their own: a pooled socket of the app's (to a private host) is never reused for a tenant.
    this.httpAgent = new HttpAgent({ keepAlive: true, lookup: guard.lookup });
    this.httpsAgent = new HttpsAgent({ keepAlive: true, lookup: guard.lookup });
  }

  onModuleDestroy(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

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
    if (endpoint.guarded) return this.postGuarded(endpoint, headers, body);
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

  /** A tenant subscription's request: refused IP literals never connect, names resolve through the guard. */
  private postGuarded(
    endpoint: WebhookEndpoint,
    headers: Record<string, string>,
    body: string,
  ): Promise<WebhookResponse> {
    const url = new URL(endpoint.url);
    const literal = this.guard.refusedLiteral(url);
    if (literal) {
      return Promise.resolve({
        kind: 'targetRefused',
        detail: `POST ${endpoint.displayUrl} not sent: ${literal} is not an address subscriptions may reach`,
      });
    }
    const signal = AbortSignal.timeout(endpoint.timeoutMs);
    const https = url.protocol === 'https:';
    return new Promise<WebhookResponse>((resolve) => {
      let settled = false;
      const settle = (response: WebhookResponse): void => {
        if (settled) return;
        settled = true;
        resolve(response);
      };
      const fail = (error: NodeJS.ErrnoException): void => {
        if (signal.aborted) return settle({ kind: 'timeout', timeoutMs: endpoint.timeoutMs });
        if (error.code === TARGET_REFUSED)
          return settle({
            kind: 'targetRefused',
            detail: `POST ${endpoint.displayUrl} not sent: ${error.message}`,
          });
        settle({
          kind: 'connectionError',
          detail: `POST ${endpoint.displayUrl} failed: ${error.code ? `${error.code} ` : ''}${error.message}`,
        });
      };
      const request = (https ? httpsRequest : httpRequest)(url, {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: https ? this.httpsAgent : this.httpAgent,
        signal,
      });
      request.on('error', fail);
      request.on('response', (response: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (): void =>
          settle({
            kind: 'response',
            status: response.statusCode ?? 0,
            statusText: response.statusMessage ?? '',
            headers: toHeaders(response.headers),
            body: Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8'),
          });
        response.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          size += chunk.byteLength;
          // Enough read: drop the connection rather than read an endless body.
          if (size >= MAX_RESPONSE_BYTES) {
            done();
            response.destroy();
          }
        });
        response.on('end', done);
        response.on('error', fail);
      });
      request.end(body);
    });
  }
}

function toHeaders(raw: IncomingMessage['headers']): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value])
      headers.append(name, one);
  }
  return headers;
}

async function readBounded(response: Response): Promise<string> {
  if (!response.body) return '';
  const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
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
