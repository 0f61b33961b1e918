import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import type { QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OUTBOX_WEBHOOKS_RESOLVED_OPTIONS } from './outbox-webhooks.module-definition';
import type { ResolvedOutboxWebhooksOptions } from './outbox-webhooks-options.interface';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type { OutboxConsumer } from '../model/outbox-consumer';
import { OutboxConsumerRegistry, type TenantConsumerSource } from '../consumers/outbox-consumer.registry';
import { OutboxStore } from '../store/outbox.store';
import { setTransactionContext } from '../store/sql';
import { tenantSubscriptions, type SubscriptionRow } from './webhooks-sql';
import { WebhookConsumerFactory } from './webhook-consumer.factory';
import { resolveWebhookEndpoint, type WebhookEndpoint, type WebhookProblem } from './webhook-endpoint';
import { WEBHOOK_ERROR_CODES } from './webhook-outcome';
import { SubscriptionSecretCipher } from './subscription-secret-cipher';
import { subscriptionLimits } from './subscription-limits';
import type { OutboxConsumerLimits } from '../model/outbox-consumer';

/** Consumer name of a tenant's subscription. */
export function subscriptionConsumerName(name: string): string {
  return `subscription:${name}`;
}

/** True when `consumer` is the consumer name of a tenant's subscription. */
export function isSubscriptionConsumer(consumer: string): boolean {
  return consumer.startsWith('subscription:');
}

/** Circuit breaker key of a subscription: its id, so a subscription removed and added again starts afresh. */
export function subscriptionEndpointKey(id: string): string {
  return `subscription:${id}`;
}

/** What a subscription's sealed secret is bound to: its tenant and id (a sealed secret moved to another row fails). */
export function secretContext(row: Pick<SubscriptionRow, 'id' | 'tenant_id'>): string {
  return `${row.tenant_id}/${row.id}`;
}

/** Tenants whose subscriptions are cached at most; older entries are dropped first. */
const CACHE_MAX_TENANTS = 10_000;

/**
 * The tenant-scoped consumers of the subscriptions table, one `subscription:<name>` per row. The relay asks
 * once per tenant per round; answers are cached for `subscriptions.cacheTtlMs`, so a subscription added
 * or removed on another instance takes effect here within that time (at once on the instance that made the
 * change). A paused subscription still gets its delivery rows, but they are given back unsent
 * (`subscriptionPaused`, no attempt spent) until it is resumed.
 */
@Injectable()
export class WebhookSubscriptionSource implements TenantConsumerSource, OnModuleInit {
  private readonly logger = new Logger(WebhookSubscriptionSource.name);
  private readonly cache = new Map<string, { expiresAt: number; consumers: Promise<OutboxConsumer[]> }>();
  private readonly warnedPlaintext = new Set<string>();

  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_WEBHOOKS_RESOLVED_OPTIONS) private readonly webhookOptions: ResolvedOutboxWebhooksOptions,
    private readonly registry: OutboxConsumerRegistry,
    private readonly store: OutboxStore,
    private readonly factory: WebhookConsumerFactory,
    private readonly cipher: SubscriptionSecretCipher,
  ) {}

  /** False when `subscriptions.enabled` turned them off on this instance. */
  get enabled(): boolean {
    return this.webhookOptions.subscriptions.enabled;
  }

  onModuleInit(): void {
    if (this.enabled) this.registry.addTenantSource(this);
  }

  /**
   * The tenant's subscriptions as consumers. A failed read rejects (the relay skips the tenant this round)
   * rather than answer "none": fan-out must never settle an event without its subscribers.
   */
  consumersForTenant(tenantId: string): Promise<OutboxConsumer[]> {
    const now = Date.now();
    const cached = this.cache.get(tenantId);
    if (cached && cached.expiresAt > now) return cached.consumers;
    const entry = {
      expiresAt: now + this.webhookOptions.subscriptions.cacheTtlMs,
      consumers: this.load(tenantId),
    };
    this.cache.delete(tenantId);
    this.cache.set(tenantId, entry);
    entry.consumers.catch(() => {
      if (this.cache.get(tenantId) === entry) this.cache.delete(tenantId);
    });
    if (this.cache.size > CACHE_MAX_TENANTS) this.cache.delete(this.cache.keys().next().value!);
    return entry.consumers;
  }

  /** Forgets the cached subscriptions of a tenant (after a change made through the admin API). */
  invalidate(tenantId: string): void {
    this.cache.delete(tenantId);
  }

  /**
   * Checks and merges a stored (or proposed) subscription, opening its sealed secret, and reads its limits
   * (`concurrency`, `rateLimit` in its options: see `subscriptionLimits`); `where` prefixes the problems.
   */
  endpointOf(
    row: Pick<
      SubscriptionRow,
      | 'id'
      | 'tenant_id'
      | 'name'
      | 'url'
      | 'events'
      | 'secret'
      | 'secret_key_id'
      | 'secret_sealed'
      | 'options'
    >,
    where: string,
  ): { endpoint: WebhookEndpoint; limits: OutboxConsumerLimits | undefined; problems: WebhookProblem[] } {
    const consumer = subscriptionConsumerName(row.name);
    const sealedProblems: WebhookProblem[] = [];
    let secret = row.secret ?? undefined;
    if (row.secret_sealed !== null && row.secret_key_id !== null) {
      try {
        secret = this.cipher.open(
          { keyId: row.secret_key_id, sealed: row.secret_sealed },
          secretContext(row),
        );
      } catch (error) {
        sealedProblems.push({ field: 'secret', message: `${where}.secret: ${(error as Error).message}` });
      }
    }
    const { concurrency, rateLimit, ...options } = row.options;
    const limited = subscriptionLimits({ concurrency, rateLimit }, where);
    const { endpoint, problems } = resolveWebhookEndpoint(
      {
        ...options,
        circuitBreaker: undefined,
        url: row.url,
        events: row.events,
        secret,
      },
      {
        where,
        key: subscriptionEndpointKey(row.id),
        consumer,
        tenantId: row.tenant_id,
        leaseMs: this.options.relay.leaseMs,
        maxAttempts: this.options.maxAttempts,
        backoff: this.options.backoff,
        timeoutMs: Math.min(this.webhookOptions.subscriptions.timeoutMs, this.options.relay.leaseMs - 1),
        guarded: true,
        responseBodyInErrors: this.webhookOptions.subscriptions.responseBodyInErrors,
      },
    );
    return {
      endpoint,
      limits: limited.limits,
      problems: [...sealedProblems, ...problems, ...limited.problems],
    };
  }

  /**
   * Runs `work` in a transaction with the tenant set for row-level security; with `relayWait`, bounded as the
   * relay's round trips are (see `RoundTripDeadline`).
   */
  tenantTransaction<T>(
    tenantId: string,
    work: (runner: QueryRunner) => Promise<T>,
    relayWait = false,
  ): Promise<T> {
    return this.store.transaction(
      async (runner) => {
        await this.store.rows(
          runner,
          setTransactionContext(this.options.tenantSetting, tenantId, this.options.relay.leaseMs),
        );
        return work(runner);
      },
      relayWait ? { trip: 'subscriptions', tenantId } : undefined,
    );
  }

  private async load(tenantId: string): Promise<OutboxConsumer[]> {
    // read in the relay's round: a database that does not answer must not hold the round up
    const rows = await this.tenantTransaction(
      tenantId,
      (runner) => this.store.rows<SubscriptionRow>(runner, tenantSubscriptions(this.options.names, tenantId)),
      true,
    );
    return rows.map((row) => this.toConsumer(row));
  }

  private toConsumer(row: SubscriptionRow): OutboxConsumer {
    const { endpoint, limits, problems } = this.endpointOf(
      row,
      `subscription "${row.name}" of tenant ${row.tenant_id}`,
    );
    const recheckMs = this.webhookOptions.subscriptions.pausedRecheckMs;
    if (problems.length > 0) {
      // Rows are checked when added; this one was changed by hand. Hold its deliveries back rather than guess.
      const error = problems.map((p) => p.message).join('; ');
      this.logger.error(`${error}; its deliveries wait until it is fixed`);
      return this.factory.toConsumer(endpoint, async () => ({
        status: 'deferred',
        errorCode: WEBHOOK_ERROR_CODES.subscriptionInvalid,
        error,
        retryAfterMs: recheckMs,
      }));
    }
    if (row.secret !== null && !this.warnedPlaintext.has(row.id)) {
      this.warnedPlaintext.add(row.id);
      this.logger.warn(
        `subscription "${row.name}" of tenant ${row.tenant_id} keeps its secret in plaintext (written before secrets ` +
          "were sealed): configure OutboxWebhooksModule's subscriptions.secretKeys and run OutboxWebhookSubscriptions.resealSecrets()",
      );
    }
    if (row.status === 'paused') {
      return this.factory.toConsumer(endpoint, async () => ({
        status: 'deferred',
        errorCode: WEBHOOK_ERROR_CODES.subscriptionPaused,
        error: `subscription "${row.name}" is paused; not sent`,
        retryAfterMs: recheckMs,
      }));
    }
    // its limits only while it sends: the claims of a paused one give its deliveries back, unsent
    const consumer = this.factory.toConsumer(endpoint);
    return limits ? { ...consumer, limits } : consumer;
  }
}
