import { backoffProblems, countProblem, durationProblem } from '../options/outbox-options';
import { messages } from '../errors/outbox.messages';
import { isEventPattern, patternCovers } from '../model/event-pattern';
import { stripUndefined } from '../model/strip-undefined';
import type { OutboxBackoffOptions } from '../options/outbox-module-options.interface';
import type { OutboxWebhookCircuitBreakerOptions } from './outbox-webhook-options.interface';
import { isReservedWebhookHeader } from './webhook-headers';
import { webhookSecretKey, WEBHOOK_SECRET_FORMAT } from './webhook-signature';

/** Circuit breaker settings when a webhook sets none. */
export const DEFAULT_WEBHOOK_CIRCUIT_BREAKER: Required<OutboxWebhookCircuitBreakerOptions> = {
  failureThreshold: 5,
  cooldownMs: 30_000,
};

/** Webhook and subscription names: letters, digits, `_`, `.`, `-`. */
export const WEBHOOK_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,100}$/;

/** A webhook or subscription, checked and merged with defaults: what the transport sends with. */
export interface WebhookEndpoint {
  /** Identity of its circuit breaker. */
  readonly key: string;
  /** Its consumer name. */
  readonly consumer: string;
  /** The subscription's tenant; null for a static webhook. */
  readonly tenantId: string | null;
  readonly url: string;
  /** The URL without query string or fragment, for logs and stats. */
  readonly displayUrl: string;
  /** The event patterns it listens to, none covered by another. */
  readonly eventPatterns: readonly string[];
  readonly timeoutMs: number;
  /** Lowercase names. */
  readonly headers: Readonly<Record<string, string>>;
  readonly secretKey: Buffer | null;
  readonly maxAttempts: number;
  readonly backoff: Required<OutboxBackoffOptions>;
  readonly retryOn4xx: boolean;
  readonly circuitBreaker: Required<OutboxWebhookCircuitBreakerOptions> | null;
  /** A tenant's subscription: connects only to addresses the target guard lets through. */
  readonly guarded: boolean;
  /** Keep a failed answer's body in the delivery's error. */
  readonly responseBodyInErrors: boolean;
}

/** The raw settings of a webhook or subscription (options, admin input or a stored row). */
export interface WebhookEndpointInput {
  url?: unknown;
  events?: unknown;
  timeoutMs?: unknown;
  headers?: unknown;
  secret?: unknown;
  maxAttempts?: unknown;
  backoff?: unknown;
  retryOn4xx?: unknown;
  circuitBreaker?: unknown;
}

/** Where the settings come from and what they default to. */
export interface WebhookEndpointContext {
  /** Prefix of problem messages, e.g. `webhooks[0] ("crm")`. */
  where: string;
  key: string;
  consumer: string;
  tenantId: string | null;
  leaseMs: number;
  maxAttempts: number;
  backoff: Required<OutboxBackoffOptions>;
  /** Used when the input sets no timeout; undefined makes `timeoutMs` required. */
  timeoutMs?: number;
  /** A tenant's subscription (see `WebhookTargetGuard`). Default: false (the operator's own webhook). */
  guarded?: boolean;
  /** Default: true. */
  responseBodyInErrors?: boolean;
}

/** One problem found in webhook settings: the field, and a sentence. */
export interface WebhookProblem {
  field: string;
  message: string;
}

/** Checks webhook settings and merges defaults; every problem is listed. */
export function resolveWebhookEndpoint(
  input: WebhookEndpointInput,
  context: WebhookEndpointContext,
): { endpoint: WebhookEndpoint; problems: WebhookProblem[] } {
  const problems: WebhookProblem[] = [];
  const problem = (field: string, message: string): void => {
    problems.push({ field, message });
  };
  const at = (field: string): string => `${context.where}.${field}`;

  let displayUrl = String(input.url);
  if (typeof input.url !== 'string') {
    problem('url', messages.badOption(at('url'), 'an http: or https: URL', input.url));
  } else {
    const parsed = URL.canParse(input.url) ? new URL(input.url) : null;
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
      problem('url', messages.badOption(at('url'), 'an http: or https: URL', input.url));
    } else if (parsed.username || parsed.password) {
      problem('url', messages.webhookUrlCredentials(at('url')));
    } else {
      displayUrl = `${parsed.origin}${parsed.pathname}`;
    }
  }

  const eventPatterns = reducePatterns(input.events, at('events'), problem);

  const timeoutMs = input.timeoutMs ?? context.timeoutMs;
  const timeoutProblem = durationProblem(at('timeoutMs'), timeoutMs, {
    below: { name: 'relay.leaseMs', ms: context.leaseMs },
  });
  if (timeoutProblem) problem('timeoutMs', timeoutProblem);

  const headers: Record<string, string> = {};
  if (input.headers !== undefined) {
    if (input.headers === null || typeof input.headers !== 'object' || Array.isArray(input.headers)) {
      problem(
        'headers',
        messages.badOption(at('headers'), 'an object of header names to string values', input.headers),
      );
    } else {
      for (const [name, value] of Object.entries(input.headers)) {
        if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || isReservedWebhookHeader(name)) {
          problem('headers', messages.webhookBadHeader(at('headers'), name));
        } else if (typeof value !== 'string' || /[\r\n\0]/.test(value)) {
          problem(
            'headers',
            messages.badOption(`${at('headers')}.${name}`, 'a string without line breaks', value),
          );
        } else {
          headers[name.toLowerCase()] = value;
        }
      }
    }
  }

  let secretKey: Buffer | null = null;
  if (input.secret !== undefined && input.secret !== null) {
    secretKey = typeof input.secret === 'string' ? webhookSecretKey(input.secret) : null;
    if (!secretKey) {
      problem('secret', messages.badOption(at('secret'), WEBHOOK_SECRET_FORMAT, '(hidden)'));
    }
  }

  const maxAttempts = input.maxAttempts ?? context.maxAttempts;
  const attemptsProblem = countProblem(at('maxAttempts'), maxAttempts);
  if (attemptsProblem) problem('maxAttempts', attemptsProblem);

  let backoff = context.backoff;
  if (input.backoff !== undefined) {
    if (input.backoff === null || typeof input.backoff !== 'object') {
      problem(
        'backoff',
        messages.badOption(at('backoff'), 'an object { baseMs, capMs, jitter }', input.backoff),
      );
    } else {
      backoff = { ...context.backoff, ...stripUndefined(input.backoff as OutboxBackoffOptions) };
      for (const message of backoffProblems(at('backoff'), backoff)) problem('backoff', message);
    }
  }

  const retryOn4xx = input.retryOn4xx ?? false;
  if (typeof retryOn4xx !== 'boolean')
    problem('retryOn4xx', messages.badOption(at('retryOn4xx'), 'true or false', retryOn4xx));

  let circuitBreaker: Required<OutboxWebhookCircuitBreakerOptions> | null = DEFAULT_WEBHOOK_CIRCUIT_BREAKER;
  if (input.circuitBreaker === false) {
    circuitBreaker = null;
  } else if (input.circuitBreaker !== undefined) {
    if (input.circuitBreaker === null || typeof input.circuitBreaker !== 'object') {
      problem(
        'circuitBreaker',
        messages.badOption(
          at('circuitBreaker'),
          'false or { failureThreshold, cooldownMs }',
          input.circuitBreaker,
        ),
      );
    } else {
      circuitBreaker = {
        ...DEFAULT_WEBHOOK_CIRCUIT_BREAKER,
        ...stripUndefined(input.circuitBreaker as OutboxWebhookCircuitBreakerOptions),
      };
      const field = at('circuitBreaker');
      for (const found of [
        countProblem(`${field}.failureThreshold`, circuitBreaker.failureThreshold),
        durationProblem(`${field}.cooldownMs`, circuitBreaker.cooldownMs),
      ])
        if (found) problem('circuitBreaker', found);
    }
  }

  return {
    endpoint: {
      key: context.key,
      consumer: context.consumer,
      tenantId: context.tenantId,
      url: String(input.url),
      displayUrl,
      eventPatterns,
      timeoutMs: timeoutMs as number,
      headers,
      secretKey,
      maxAttempts: maxAttempts as number,
      backoff,
      retryOn4xx: retryOn4xx === true,
      circuitBreaker,
      guarded: context.guarded === true,
      responseBodyInErrors: context.responseBodyInErrors !== false,
    },
    problems,
  };
}

/**
 * The patterns of a list that no other pattern of it covers (`*` covers everything, `crm.*` covers
 * `crm.contact.*` and `crm.deal.created.v1`). Also used for transports and brokers.
 */
export function reducePatterns(
  events: unknown,
  field: string,
  problem: (field: string, message: string) => void,
): string[] {
  if (!Array.isArray(events) || events.length === 0) {
    problem('events', messages.badOption(field, 'a non-empty array of event names or patterns', events));
    return [];
  }
  const bad = events.filter((p) => !isEventPattern(p));
  for (const pattern of bad) problem('events', messages.badPattern(field, pattern));
  if (bad.length > 0) return [];
  const patterns = [...new Set(events as string[])];
  const kept = patterns.filter((p) => !patterns.some((q) => q !== p && patternCovers(q, p)));
  return kept;
}
