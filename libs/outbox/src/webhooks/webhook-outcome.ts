import type { ExternalDeliveryResult } from '../model/outbox-consumer';
import { WEBHOOK_RUN_ID_HEADER } from './webhook-headers';

/**
 * Stable error codes a webhook delivery stores in `outbox_deliveries.error_code` (the relay adds
 * `staleLeaseRecovered` when it takes over a delivery whose relay died).
 */
export const WEBHOOK_ERROR_CODES = {
  /** No HTTP answer: refused, reset, DNS failure, TLS failure. Retried. */
  connectionError: 'connectionError',
  /**
   * A tenant subscription's host is, or resolved to, an address subscriptions may not reach (see
   * `subscriptions.allowPrivateTargets`); nothing was sent. Retried, as DNS may change.
   */
  targetRefused: 'targetRefused',
  /** No complete answer (status and body) within `timeoutMs`. Retried. */
  timeout: 'timeout',
  /** A non-2xx status (in `last_error`): 408, 429 and 5xx are retried; other 4xx and 3xx are dead at once unless `retryOn4xx`. */
  httpStatus: 'httpStatus',
  /** A 2xx JSON answer with `"ok": false`. Retried. */
  remoteReportedFailure: 'remoteReportedFailure',
  /** The event cannot be turned into the wire body. Dead at once. */
  malformedPayload: 'malformedPayload',
  /** The endpoint's circuit is open: not sent, no attempt spent; due again when the circuit lets a probe through. */
  circuitOpen: 'circuitOpen',
  /** The tenant paused the subscription: not sent, no attempt spent; due again on resume. */
  subscriptionPaused: 'subscriptionPaused',
  /** A stored subscription no longer passes the checks (edited by hand): held back like a paused one. */
  subscriptionInvalid: 'subscriptionInvalid',
  /**
   * `429` or `503` with `Retry-After`: not charged (a snooze, bounded by `maxSnoozes`); the webhook's deliveries of
   * that tenant wait until then (capped by the backoff cap).
   */
  retryAfter: 'retryAfter',
} as const;

/** What the transport observed for one request. */
export type WebhookResponse =
  | { kind: 'response'; status: number; statusText: string; headers: Headers; body: string }
  | { kind: 'timeout'; timeoutMs: number }
  | { kind: 'connectionError'; detail: string }
  | { kind: 'targetRefused'; detail: string };

const BODY_IN_ERROR = 500;
const STATUS_TEXT_MAX = 100;
const RUN_ID_MAX = 200;

/**
 * Turns an HTTP exchange into a delivery result: 2xx is delivered unless its JSON body says `"ok": false`;
 * `429` and `503` with a readable `Retry-After` are snoozed — no attempt charged, due again then, at most
 * `maxRetryAfterMs` away; 408, 429 and 5xx are retried (after `Retry-After` when given); other statuses are dead
 * at once unless `retryOn4xx`. The receiver's run id (JSON `runId` or `event_id`, or the `x-run-id` header) is kept. The
 * error keeps up to 500 characters of the body only with `withBody`; whatever the receiver wrote is made
 * printable (control characters escaped), since it goes to logs.
 */
export function classifyWebhookResponse(
  response: WebhookResponse,
  retryOn4xx: boolean,
  now: number = Date.now(),
  withBody = true,
  maxRetryAfterMs = Number.POSITIVE_INFINITY,
): ExternalDeliveryResult {
  if (response.kind === 'timeout') {
    return {
      status: 'failed',
      errorCode: WEBHOOK_ERROR_CODES.timeout,
      error: `no complete response within ${response.timeoutMs} ms`,
    };
  }
  if (response.kind === 'connectionError' || response.kind === 'targetRefused') {
    return {
      status: 'failed',
      errorCode: WEBHOOK_ERROR_CODES[response.kind],
      error: printable(response.detail),
    };
  }
  const json = parseJsonObject(response.body);
  const externalRunId = runIdOf(json, response.headers);
  const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'), now);
  const snippet = !withBody
    ? ''
    : printable(
        response.body.length > BODY_IN_ERROR ? `${response.body.slice(0, BODY_IN_ERROR)}…` : response.body,
      );
  if (response.status >= 200 && response.status < 300) {
    if (json?.ok === false) {
      return {
        status: 'failed',
        errorCode: WEBHOOK_ERROR_CODES.remoteReportedFailure,
        error: `receiver answered ${response.status} with ok: false${snippet ? `: ${snippet}` : ''}`,
        retryAfterMs,
        externalRunId,
      };
    }
    return { status: 'delivered', externalRunId };
  }
  const statusText = printable(response.statusText.slice(0, STATUS_TEXT_MAX));
  const error = `HTTP ${response.status}${statusText ? ` ${statusText}` : ''}${snippet ? `: ${snippet}` : ''}`;
  if (retryAfterMs !== undefined && (response.status === 429 || response.status === 503)) {
    const ms = Math.min(retryAfterMs, maxRetryAfterMs);
    return {
      status: 'snoozed',
      errorCode: WEBHOOK_ERROR_CODES.retryAfter,
      error: `${error} (Retry-After: waits ${ms} ms, no attempt charged)`,
      retryAfterMs: ms,
    };
  }
  if (isRetryableStatus(response.status) || retryOn4xx) {
    return {
      status: 'failed',
      errorCode: WEBHOOK_ERROR_CODES.httpStatus,
      error,
      retryAfterMs,
      externalRunId,
    };
  }
  return { status: 'dead', errorCode: WEBHOOK_ERROR_CODES.httpStatus, error, externalRunId };
}

/**
 * Text from a receiver made safe for one log line: line breaks, ANSI escapes and other control characters, and
 * the bidirectional overrides that reorder what a terminal shows, are written as `\n`, `\u001b`…
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex -- these characters are what it escapes
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) =>
    c === '\n'
      ? '\\n'
      : c === '\r'
        ? '\\r'
        : c === '\t'
          ? '\\t'
          : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** 408, 429 and 5xx: the receiver may accept the same request later. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/** True when a result says the endpoint itself is unwell (what the circuit breaker counts). */
export function isEndpointFailure(result: ExternalDeliveryResult): boolean {
  return (
    result.status === 'failed' &&
    (result.errorCode === WEBHOOK_ERROR_CODES.connectionError ||
      result.errorCode === WEBHOOK_ERROR_CODES.timeout ||
      result.errorCode === WEBHOOK_ERROR_CODES.httpStatus)
  );
}

/**
 * `Retry-After` in ms: delay-seconds (`120`) or an HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`), never negative;
 * undefined when absent or unreadable.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  now: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) {
    const seconds = Number(trimmed);
    return Number.isSafeInteger(seconds) ? seconds * 1000 : undefined;
  }
  if (!/[a-z]/i.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

function parseJsonObject(body: string): Record<string, unknown> | null {
  const trimmed = body.trimStart();
  if (!trimmed.startsWith('{')) return null;
  try {
    const value: unknown = JSON.parse(trimmed);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

function runIdOf(json: Record<string, unknown> | null, headers: Headers): string | null {
  const candidates = [json?.runId, json?.event_id, headers.get(WEBHOOK_RUN_ID_HEADER)];
  for (const value of candidates) {
    if (
      (typeof value === 'string' && value.length > 0) ||
      (typeof value === 'number' && Number.isFinite(value))
    ) {
      return printable(String(value).slice(0, RUN_ID_MAX));
    }
  }
  return null;
}
