import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { WEBHOOK_HEADERS } from './webhook-headers';
import type { OutboxWebhookEnvelope } from './webhook-envelope';
import { OutboxWebhookVerificationError } from './webhook-verification.error';

const SECRET_PREFIX = 'whsec_';
/** Shortest accepted secret: 16 characters, or 16 bytes after `whsec_`. */
export const MIN_WEBHOOK_SECRET_LENGTH = 16;
/** What a secret must look like, for error messages. */
export const WEBHOOK_SECRET_FORMAT =
  `whsec_ followed by the base64 of at least ${MIN_WEBHOOK_SECRET_LENGTH} bytes (Standard Webhooks; ` +
  "generateWebhookSecret() makes one; a 0.1.0 secret s keeps its key as 'whsec_' + Buffer.from(s).toString('base64'))";

/**
 * The HMAC key of a secret, as in Standard Webhooks: `whsec_<base64>` is the decoded bytes. Returns null for
 * anything else — a secret without the prefix (0.1.0 used its UTF-8 bytes, which receivers on the standard
 * libraries read as base64, so neither side could verify the other), text that is not base64, or fewer than
 * 16 bytes. To keep a 0.1.0 secret's key, write it as `whsec_` + `Buffer.from(old).toString('base64')`.
 */
export function webhookSecretKey(secret: string): Buffer | null {
  if (typeof secret !== 'string' || !secret.startsWith(SECRET_PREFIX)) return null;
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (encoded.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) return null;
  const key = Buffer.from(encoded, 'base64');
  return key.length >= MIN_WEBHOOK_SECRET_LENGTH ? key : null;
}

/** A new random secret, `whsec_` + 32 random bytes in base64, to give to a receiver. */
export function generateWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** `v1,<base64>`: HMAC-SHA256 of `${id}.${timestamp}.${body}` with the secret's key. */
export function signWebhook(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** Request headers as Node (`req.headers`) or fetch (`Headers`) give them. */
export type WebhookRequestHeaders =
  Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Input of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /** The endpoint's secret, `whsec_<base64>`; several during a rotation (any one may match). */
  secret: string | readonly string[];
  headers: WebhookRequestHeaders;
  /** The raw request body, exactly as received (not re-serialised JSON). */
  body: string | Buffer;
  /** Largest accepted distance between `webhook-timestamp` and now, in seconds (finite, ≥ 0). Default 300. */
  toleranceSeconds?: number;
  /** The current time (for tests). Default `new Date()`. */
  now?: Date;
}

/**
 * Checks a webhook request sent by this library (Standard Webhooks scheme): the timestamp is within the
 * tolerance and one `v1` signature matches, compared in constant time. Returns the parsed envelope; throws
 * `OutboxWebhookVerificationError` (with a `reason`) otherwise. Deduplicate on `envelope.eventId`.
 */
export function verifyWebhook<TData = unknown>(options: VerifyWebhookOptions): OutboxWebhookEnvelope<TData> {
  const id = header(options.headers, WEBHOOK_HEADERS.id);
  const timestampText = header(options.headers, WEBHOOK_HEADERS.timestamp);
  const signatures = header(options.headers, WEBHOOK_HEADERS.signature);
  if (!id || !timestampText || !signatures) {
    throw new OutboxWebhookVerificationError(
      'missingHeaders',
      messages.webhookMissingHeaders(Object.values(WEBHOOK_HEADERS).slice(0, 3)),
    );
  }
  if (!/^\d{1,12}$/.test(timestampText))
    throw new OutboxWebhookVerificationError('badTimestamp', messages.webhookBadTimestamp(timestampText));
  const timestamp = Number(timestampText);
  const tolerance = options.toleranceSeconds ?? 300;
  // A NaN or infinite tolerance would accept a request signed in 1970, so a replay of any captured request.
  if (!Number.isFinite(tolerance) || tolerance < 0)
    throw new OutboxValidationError(
      'toleranceSeconds',
      messages.badOption('toleranceSeconds', 'a finite number of seconds ≥ 0', tolerance),
    );
  const now = Math.floor((options.now ?? new Date()).getTime() / 1000);
  if (Math.abs(now - timestamp) > tolerance) {
    throw new OutboxWebhookVerificationError(
      'staleTimestamp',
      messages.webhookStaleTimestamp(now - timestamp, tolerance),
    );
  }
  const body = typeof options.body === 'string' ? options.body : options.body.toString('utf8');
  const secrets = typeof options.secret === 'string' ? [options.secret] : options.secret;
  const keys = secrets.map((secret, i) => {
    const key = webhookSecretKey(secret);
    if (!key) {
      const field = typeof options.secret === 'string' ? 'secret' : `secret[${i}]`;
      throw new OutboxValidationError(field, messages.badOption(field, WEBHOOK_SECRET_FORMAT, '(hidden)'));
    }
    return key;
  });
  const given = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => Buffer.from(s.slice(3), 'base64'));
  const matches = keys.some((key) => {
    const expected = Buffer.from(signWebhook(key, id, timestamp, body).slice(3), 'base64');
    return given.some((g) => g.length === expected.length && timingSafeEqual(g, expected));
  });
  if (!matches) throw new OutboxWebhookVerificationError('badSignature', messages.webhookBadSignature(id));
  try {
    return JSON.parse(body) as OutboxWebhookEnvelope<TData>;
  } catch {
    throw new OutboxWebhookVerificationError('badBody', messages.webhookBadBody(id));
  }
}

function header(headers: WebhookRequestHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value.join(' ') : (value as string | undefined);
}
