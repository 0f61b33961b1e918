import { Inject, Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import { OUTBOX_WEBHOOKS_RESOLVED_OPTIONS } from './outbox-webhooks.module-definition';
import type { ResolvedOutboxWebhooksOptions } from './outbox-webhooks-options.interface';
import { OutboxError, OutboxValidationError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import type {
  OutboxWebhookSubscription,
  OutboxWebhookSubscriptionInput,
} from './outbox-webhook-options.interface';
import { UUID_PATTERN } from '../model/outbox.constants';
import { OutboxStore } from '../store/outbox.store';
import * as wq from './webhooks-sql';
import { OutboxWebhookService } from './outbox-webhook.service';
import { WEBHOOK_NAME_PATTERN } from './webhook-endpoint';
import { SubscriptionSecretCipher, type SealedSecret } from './subscription-secret-cipher';
import { WebhookTargetGuard } from './webhook-target-guard';
import {
  secretContext,
  subscriptionConsumerName,
  subscriptionEndpointKey,
  WebhookSubscriptionSource,
} from './webhook-subscription.source';

/** The optional settings a subscription stores (the rest have columns of their own). */
const STORED_OPTIONS = [
  'headers',
  'timeoutMs',
  'maxAttempts',
  'backoff',
  'retryOn4xx',
  'concurrency',
  'rateLimit',
] as const;

/**
 * The admin API of run-time webhook subscriptions, per tenant: add, list, pause, resume, remove. Each call is
 * one short transaction with the tenant set (row-level security applies to the `outbox_relay` role). Changes
 * take effect at once on this instance and within `subscriptions.cacheTtlMs` on the others.
 */
@Injectable()
export class OutboxWebhookSubscriptions {
  constructor(
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_WEBHOOKS_RESOLVED_OPTIONS) private readonly webhookOptions: ResolvedOutboxWebhooksOptions,
    private readonly store: OutboxStore,
    private readonly source: WebhookSubscriptionSource,
    private readonly webhooks: OutboxWebhookService,
    private readonly guard: WebhookTargetGuard,
    private readonly cipher: SubscriptionSecretCipher,
  ) {}

  /** False when `subscriptions.enabled` turned them off on this instance (then `add()` refuses). */
  get enabled(): boolean {
    return this.webhookOptions.subscriptions.enabled;
  }

  /**
   * Adds a subscription; it receives the tenant's events relayed from then on (events already enqueued but not
   * yet relayed included). Throws `OutboxValidationError` naming the field for bad input or a name in use.
   */
  async add(tenantId: string, input: OutboxWebhookSubscriptionInput): Promise<OutboxWebhookSubscription> {
    if (!this.enabled) throw new OutboxError(messages.webhookSubscriptionsDisabled());
    const tenant = checkTenant(tenantId);
    if (input === null || typeof input !== 'object') {
      throw new OutboxValidationError(
        'input',
        messages.badOption('input', 'an object { name, url, events, … }', input),
      );
    }
    if (typeof input.name !== 'string' || !WEBHOOK_NAME_PATTERN.test(input.name)) {
      throw new OutboxValidationError(
        'name',
        messages.badOption('name', 'a name of 1 to 100 letters, digits and _ . -', input.name),
      );
    }
    const stored = Object.fromEntries(
      STORED_OPTIONS.filter((key) => input[key] !== undefined).map((key) => [key, input[key]]),
    );
    const row = {
      id: randomUUID(),
      tenant_id: tenant,
      name: input.name,
      url: input.url,
      events: [...(input.events ?? [])],
      secret: input.secret ?? null,
      secret_key_id: null,
      secret_sealed: null,
      options: stored,
    };
    const { problems } = this.source.endpointOf(row, 'subscription');
    if (problems.length > 0)
      throw new OutboxValidationError(problems[0]!.field, problems.map((p) => p.message).join('; '));
    const target = await this.guard.urlProblem('url', new URL(row.url));
    if (target) throw new OutboxValidationError('url', target);
    let sealed: SealedSecret | null = null;
    if (row.secret !== null) {
      if (this.cipher.sealingKeyId === null)
        throw new OutboxValidationError('secret', messages.subscriptionSecretNeedsKey());
      sealed = this.cipher.seal(row.secret, secretContext(row));
    }
    const [created] = await this.source.tenantTransaction(tenant, (runner) =>
      this.store.rows<wq.SubscriptionRow>(
        runner,
        wq.insertSubscription(this.options.names, {
          id: row.id,
          tenantId: tenant,
          name: row.name,
          url: row.url,
          events: row.events,
          secretKeyId: sealed?.keyId ?? null,
          secretSealed: sealed?.sealed ?? null,
          options: stored,
        }),
      ),
    );
    if (!created) throw new OutboxValidationError('name', messages.webhookSubscriptionExists(input.name));
    this.source.invalidate(tenant);
    return toView(created);
  }

  /**
   * Seals again, under the first of `subscriptions.secretKeys`, every secret of the tenant that another
   * key sealed or that is still in plaintext; one transaction, all or nothing. Run it for every tenant after
   * putting a new key first, then drop the old key. Returns how many secrets were sealed again.
   */
  async resealSecrets(tenantId: string): Promise<number> {
    const tenant = checkTenant(tenantId);
    const keyId = this.cipher.sealingKeyId;
    if (keyId === null) throw new OutboxError(messages.subscriptionSecretNeedsKey());
    return this.source.tenantTransaction(tenant, async (runner) => {
      const rows = await this.store.rows<wq.SubscriptionRow>(
        runner,
        wq.subscriptionsToReseal(this.options.names, tenant, keyId),
      );
      if (rows.length === 0) return 0;
      const sealed = rows.map((row) => {
        const secret =
          row.secret ??
          this.cipher.open({ keyId: row.secret_key_id!, sealed: row.secret_sealed! }, secretContext(row));
        return this.cipher.seal(secret, secretContext(row)).sealed;
      });
      await this.store.rows(
        runner,
        wq.resealSubscriptionSecrets(
          this.options.names,
          tenant,
          rows.map((r) => r.id),
          keyId,
          sealed,
        ),
      );
      this.source.invalidate(tenant);
      return rows.length;
    });
  }

  /** The tenant's subscriptions, by name. */
  async list(tenantId: string): Promise<OutboxWebhookSubscription[]> {
    const tenant = checkTenant(tenantId);
    const rows = await this.source.tenantTransaction(tenant, (runner) =>
      this.store.rows<wq.SubscriptionRow>(runner, wq.tenantSubscriptions(this.options.names, tenant)),
    );
    return rows.map(toView);
  }

  /** One subscription, or null. */
  async get(tenantId: string, name: string): Promise<OutboxWebhookSubscription | null> {
    const tenant = checkTenant(tenantId);
    const [row] = await this.source.tenantTransaction(tenant, (runner) =>
      this.store.rows<wq.SubscriptionRow>(runner, wq.subscriptionNamed(this.options.names, tenant, name)),
    );
    return row ? toView(row) : null;
  }

  /** Holds its deliveries back (rows still created, nothing sent, no attempt spent). Null when there is none. */
  pause(tenantId: string, name: string): Promise<OutboxWebhookSubscription | null> {
    return this.setStatus(tenantId, name, 'paused');
  }

  /** Sends again, starting with the deliveries held back while paused. Null when there is none. */
  resume(tenantId: string, name: string): Promise<OutboxWebhookSubscription | null> {
    return this.setStatus(tenantId, name, 'active');
  }

  /**
   * Removes a subscription; its waiting deliveries are dropped and their events settled (see `removeSubscription`).
   * `removed` is false when there was none.
   */
  async remove(tenantId: string, name: string): Promise<{ removed: boolean; deliveriesDropped: number }> {
    const tenant = checkTenant(tenantId);
    const [result] = await this.source.tenantTransaction(tenant, (runner) =>
      this.store.rows<{ id: string | null; dropped: number }>(
        runner,
        wq.removeSubscription(this.options.names, tenant, name, subscriptionConsumerName(name)),
      ),
    );
    this.source.invalidate(tenant);
    if (result?.id) this.webhooks.forgetEndpoint(subscriptionEndpointKey(result.id));
    return { removed: Boolean(result?.id), deliveriesDropped: result?.dropped ?? 0 };
  }

  private async setStatus(
    tenantId: string,
    name: string,
    status: 'active' | 'paused',
  ): Promise<OutboxWebhookSubscription | null> {
    const tenant = checkTenant(tenantId);
    const [row] = await this.source.tenantTransaction(tenant, (runner) =>
      this.store.rows<wq.SubscriptionRow>(
        runner,
        wq.setSubscriptionStatus(this.options.names, tenant, name, subscriptionConsumerName(name), status),
      ),
    );
    this.source.invalidate(tenant);
    return row ? toView(row) : null;
  }
}

function checkTenant(tenantId: string): string {
  if (typeof tenantId !== 'string' || !UUID_PATTERN.test(tenantId))
    throw new OutboxValidationError('tenantId', messages.notUuid('tenantId', tenantId));
  return tenantId.toLowerCase();
}

function toView(row: wq.SubscriptionRow): OutboxWebhookSubscription {
  const options = row.options as {
    headers?: Record<string, string>;
    timeoutMs?: number;
    maxAttempts?: number;
    retryOn4xx?: boolean;
    concurrency?: { global: number };
    rateLimit?: { limit: number; intervalMs: number };
  };
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    consumer: subscriptionConsumerName(row.name),
    url: row.url,
    events: row.events,
    status: row.status,
    hasSecret: row.secret !== null || row.secret_sealed !== null,
    headerNames: Object.keys(options.headers ?? {}),
    timeoutMs: options.timeoutMs ?? null,
    maxAttempts: options.maxAttempts ?? null,
    retryOn4xx: options.retryOn4xx ?? false,
    concurrency: options.concurrency ? { global: options.concurrency.global } : null,
    rateLimit: options.rateLimit
      ? { limit: options.rateLimit.limit, intervalMs: options.rateLimit.intervalMs }
      : null,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
