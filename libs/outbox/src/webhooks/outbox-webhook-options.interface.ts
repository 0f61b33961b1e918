import type { OnOutboxEventOptions } from '../model/outbox-handler-options.interface';
import type { OutboxBackoffOptions } from '../options/outbox-module-options.interface';

/**
 * Per-endpoint circuit breaker. After `failureThreshold` failures in a row (connection errors, timeouts, 408,
 * 429 and 5xx) the endpoint is paused for `cooldownMs`: its deliveries are given back (`circuitOpen`, no
 * attempt spent) instead of being sent. Then one probe request goes out; success closes the circuit, failure
 * opens it again. State is in memory, per relay instance.
 */
export interface OutboxWebhookCircuitBreakerOptions {
  /** Consecutive failures that open the circuit. Default: `5`. */
  failureThreshold?: number;
  /** How long an open circuit holds deliveries back before a probe, in ms. Default: `30000`. */
  cooldownMs?: number;
}

/** One HTTP endpoint that receives outbox events: `OutboxWebhooksModule.forRoot({ webhooks: [ … ] })`. */
export interface OutboxWebhookOptions {
  /** Unique name (letters, digits, `_`, `.`, `-`; up to 100). Its consumer is named `webhook:<name>`. */
  name: string;
  /** `http:` or `https:` URL the events are POSTed to; no credentials in it (use `headers`). Redirects are not followed. */
  url: string;
  /**
   * The events it receives: exact names (`crm.contact.created.v1`), prefixes (`crm.contact.*`) or `*`. Patterns
   * covered by another one are dropped; what remains must currently be a single pattern.
   */
  events: readonly string[];
  /** Time for one request, response body included, in ms; must be below `relay.leaseMs`. */
  timeoutMs: number;
  /**
   * Extra request headers (e.g. `authorization`); the `webhook-*`, `outbox-*` and `content-type` headers are
   * reserved. Default: none.
   */
  headers?: Readonly<Record<string, string>>;
  /**
   * Signing secret, as Standard Webhooks writes it: `whsec_<base64>` of at least 16 bytes (the key is the decoded
   * bytes; `generateWebhookSecret()` makes one). A 0.1.0 secret `s` without the prefix keeps its key as
   * `'whsec_' + Buffer.from(s).toString('base64')`. Default: none (requests are not signed).
   */
  secret?: string;
  /** Attempts before a delivery is dead. Default: `OutboxModule`'s `maxAttempts`. */
  maxAttempts?: number;
  /** Backoff between attempts; fields left out take `OutboxModule`'s. Default: its `backoff`. */
  backoff?: OutboxBackoffOptions;
  /** Retry 4xx answers other than 408 and 429, which are otherwise dead at once. Default: `false`. */
  retryOn4xx?: boolean;
  /**
   * Circuit breaker of this endpoint, or `false` for none; fields left out take their defaults. Default:
   * `{ failureThreshold: 5, cooldownMs: 30000 }`.
   */
  circuitBreaker?: OutboxWebhookCircuitBreakerOptions | false;
  /**
   * At most this many of this webhook's deliveries in flight at once, across every relay: `global` over all tenants,
   * `perTenant` in each tenant; either or both, as `@OnOutboxEvent`'s. Deliveries over the cap wait, uncharged.
   * Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no cap.
   */
  concurrency?: OnOutboxEventOptions['concurrency'];
  /**
   * At most `limit` of this webhook's deliveries claimed (each one request) in any window of `intervalMs` (sliding), across
   * every relay: over all tenants, or in each tenant with `perTenant: true`, or per key with `perKey`, as
   * `@OnOutboxEvent`'s. Deliveries over the limit wait,
   * uncharged. Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no limit.
   */
  rateLimit?: OnOutboxEventOptions['rateLimit'];
}

/**
 * Run-time webhook subscriptions per tenant (the `outbox_webhook_subscriptions` table):
 * `OutboxWebhooksModule.forRoot({ subscriptions: { … } })`.
 */
export interface OutboxWebhookSubscriptionsOptions {
  /** Deliver to the subscriptions table on this instance (needs the outbox migrations). Default: `true`. */
  enabled?: boolean;
  /** How long a relay reuses a tenant's subscriptions before reading them again, in ms. Default: `5000`. */
  cacheTtlMs?: number;
  /** How often deliveries of a paused subscription are looked at again, in ms. Default: `60000`. */
  pausedRecheckMs?: number;
  /**
   * Request timeout of subscriptions that set none, in ms; when unset, it is capped below `OutboxModule`'s `relay.leaseMs`.
   * Default: `10000`.
   */
  timeoutMs?: number;
  /**
   * Private addresses tenant subscriptions may reach after all: IP addresses or CIDR ranges (`'10.20.0.0/16'`,
   * `'fd00:ec2::/32'`, `'127.0.0.1'`). Otherwise a subscription whose host is, or resolves to, a loopback,
   * private, link-local (cloud metadata), unique-local, carrier-grade NAT, unspecified, multicast or reserved
   * address is refused by `add()`, and again at every request, after the relay resolved the host itself (DNS
   * rebinding). Static `webhooks` are never checked. Default: `[]`.
   */
  allowPrivateTargets?: readonly string[];
  /**
   * Keep up to 500 characters of a failed answer's body in the delivery's error, which the tenant reads back
   * through `deliveries()` and `failedEvents()`; otherwise only the status line is kept. Static `webhooks` always
   * keep it. Default: `false`.
   */
  responseBodyInErrors?: boolean;
  /**
   * Keys that encrypt subscription secrets in the database (AES-256-GCM), each `{ id, key }` with `key` 32 bytes
   * in base64 (`openssl rand -base64 32`) or a Buffer. The first seals new secrets; every key listed opens what it
   * sealed. To rotate, put a new key first, run `OutboxWebhookSubscriptions.resealSecrets(tenantId)` for every
   * tenant, then drop the old key. Without a key, `add()` refuses a secret. Default: `[]`.
   */
  secretKeys?: readonly OutboxSecretKey[];
}

/** A key of `subscriptions.secretKeys` (`OutboxWebhooksModule`). */
export interface OutboxSecretKey {
  /** Stored beside each secret it sealed (letters, digits, `_`, `.`, `-`; up to 64); never reuse an id. */
  id: string;
  /** 32 bytes: base64 text or a Buffer. */
  key: string | Buffer;
}

/** What a tenant gives to `OutboxWebhookSubscriptions.add()`: a webhook, minus the circuit breaker settings. */
export interface OutboxWebhookSubscriptionInput {
  /** Unique per tenant (letters, digits, `_`, `.`, `-`; up to 100). Its consumer is named `subscription:<name>`. */
  name: string;
  /**
   * `http:` or `https:` URL the events are POSTed to; no credentials in it (use `headers`). Redirects are not
   * followed.
   */
  url: string;
  /** The events it receives, as for a webhook: exact names, prefixes (`crm.contact.*`) or `*`. */
  events: readonly string[];
  /**
   * Time for one request, response body included, in ms; must be below `relay.leaseMs`.
   * Default: `OutboxWebhooksModule`'s `subscriptions.timeoutMs`.
   */
  timeoutMs?: number;
  /** Extra request headers; `webhook-*`, `outbox-*` and `content-type` are reserved. Default: none. */
  headers?: Readonly<Record<string, string>>;
  /**
   * Signing secret, as for a webhook: `whsec_<base64>` of at least 16 bytes.
   * Default: none (requests are not signed).
   */
  secret?: string;
  /** Attempts before a delivery is dead. Default: `OutboxModule`'s `maxAttempts`. */
  maxAttempts?: number;
  /** Backoff between attempts; fields left out take `OutboxModule`'s. Default: its `backoff`. */
  backoff?: OutboxBackoffOptions;
  /** Retry 4xx answers other than 408 and 429, which are otherwise dead at once. Default: `false`. */
  retryOn4xx?: boolean;
  /**
   * At most `global` of this subscription's requests in flight at once, across every relay. Deliveries over the
   * cap wait, uncharged. Enforced in the database (docs/flow-control.md#limits-on-tenants-subscriptions).
   * Default: no cap.
   */
  concurrency?: { global: number };
  /**
   * At most `limit` of this subscription's requests claimed in any window of `intervalMs` (sliding), across every
   * relay. Deliveries over the limit wait, uncharged. Enforced in the database
   * (docs/flow-control.md#limits-on-tenants-subscriptions). Default: no limit.
   */
  rateLimit?: { limit: number; intervalMs: number };
}

/** A stored subscription, as the admin API returns it (never the secret, only header names). */
export interface OutboxWebhookSubscription {
  id: string;
  tenantId: string;
  name: string;
  /** Its consumer name in `outbox_deliveries`: `subscription:<name>`. */
  consumer: string;
  url: string;
  events: string[];
  status: 'active' | 'paused';
  hasSecret: boolean;
  headerNames: string[];
  timeoutMs: number | null;
  maxAttempts: number | null;
  retryOn4xx: boolean;
  /** Its cap on requests in flight, or null. */
  concurrency: { global: number } | null;
  /** Its rate limit, or null. */
  rateLimit: { limit: number; intervalMs: number } | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The state of one endpoint's circuit breaker on this instance. */
export interface OutboxWebhookCircuitState {
  /** The consumer that sends to it (`webhook:<name>` or `subscription:<name>`). */
  consumer: string;
  /** The subscription's tenant; null for a static webhook. */
  tenantId: string | null;
  /** The endpoint, without query string. */
  url: string;
  /** `open`: deliveries are held back (paused); `halfOpen`: one probe is in flight. */
  state: 'closed' | 'open' | 'halfOpen';
  consecutiveFailures: number;
  /** When it last opened; null while it never did. */
  openedAt: Date | null;
  /** When an open circuit lets the next probe through; null unless open. */
  probeAt: Date | null;
}
