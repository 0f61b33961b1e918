import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import type * as PromClient from 'prom-client';
import { OUTBOX_RESOLVED_OPTIONS } from '../../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../../options/outbox-module-options.interface';
import { OutboxWebhookService } from '../../webhooks/outbox-webhook.service';
import { isSubscriptionConsumer } from '../../webhooks/webhook-subscription.source';
import { OutboxConsumerRegistry } from '../../consumers/outbox-consumer.registry';
import { errorText } from '../../errors/error-text';
import { OutboxStore } from '../../store/outbox.store';
import type { OldestPendingAgeRow } from '../../store/sql/pending-age';
import { PendingAgeReadings } from '../../store/pending-age-readings';
import { OutboxInstrumentation } from '../../extension/outbox-instrumentation';
import { loadOptionalPeer } from '../../extension/optional-peer';
import type { OutboxMetricsModuleOptions, OutboxMetricsRegistry } from './outbox-metrics-options.interface';
import { CappedLabel } from './capped-label';

/** Token of the options given to `OutboxMetricsModule.forRoot()`. */
export const OUTBOX_METRICS_OPTIONS = Symbol('OUTBOX_METRICS_OPTIONS');

const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const BATCH_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000];
/** The label value of the tenants beyond `tenantLabel.maxTenants`. */
export const OTHER_TENANTS = 'other';
/** The `consumer` label value of tenant subscriptions (beyond `subscriptionLabel.maxSubscriptions`, when set). */
export const SUBSCRIPTION_CONSUMERS = 'webhook-subscription';
/** The `consumer` label value of any other consumer this app does not host from its code (a tenant source's). */
export const TENANT_CONSUMERS = 'tenant-consumer';

/**
 * The outbox's Prometheus metrics (prom-client, loaded when this module boots): counters and histograms fed by
 * the relay's instrumentation, gauges read when scraped. Names and labels: docs/observability.md.
 */
@Injectable()
export class OutboxMetrics implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(OutboxMetrics.name);
  private ownRegistry: OutboxMetricsRegistry | null = null;
  private detach: (() => void) | null = null;
  private readonly tenantsLabelled: CappedLabel | null;
  private readonly subscriptionsLabelled: CappedLabel | null;

  constructor(
    @Inject(OUTBOX_METRICS_OPTIONS) private readonly options: OutboxMetricsModuleOptions,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly outboxOptions: ResolvedOutboxOptions,
    private readonly instrumentation: OutboxInstrumentation,
    // explicit token: the emitted type of `X | null` is Object
    @Optional() @Inject(OutboxWebhookService) private readonly webhooks: OutboxWebhookService | null,
    private readonly store: OutboxStore,
    private readonly consumers: OutboxConsumerRegistry,
  ) {
    const { tenantLabel, subscriptionLabel } = options;
    this.tenantsLabelled = tenantLabel ? new CappedLabel(tenantLabel.maxTenants) : null;
    this.subscriptionsLabelled = subscriptionLabel
      ? new CappedLabel(subscriptionLabel.maxSubscriptions)
      : null;
  }

  /** The registry the metrics are on: the one given, or the module's own. */
  get registry(): OutboxMetricsRegistry {
    if (this.options.registry) return this.options.registry;
    if (!this.ownRegistry) throw new Error('OutboxMetrics is not initialised yet');
    return this.ownRegistry;
  }

  onModuleInit(): void {
    const prom = loadOptionalPeer<typeof PromClient>('prom-client', 'OutboxMetricsModule');
    const registry = (this.options.registry ??
      (this.ownRegistry = new prom.Registry())) as PromClient.Registry;
    const registers = [registry];
    const p = this.options.prefix ?? 'outbox_';
    const buckets = this.options.durationBuckets ?? DEFAULT_BUCKETS;
    const withTenant = this.options.tenantLabel ? ['tenant'] : [];

    const enqueued = new prom.Counter({
      name: `${p}events_enqueued_total`,
      help: 'Events written by enqueue (in the caller transaction; counted whether it commits or not).',
      labelNames: ['event_name', ...withTenant],
      registers,
    });
    const deliveries = new prom.Counter({
      name: `${p}deliveries_total`,
      help: 'Delivery attempts by outcome: delivered, failed (retried), dead (no more attempts), deferred (not attempted).',
      labelNames: ['consumer', 'outcome', ...withTenant],
      registers,
    });
    const duration = new prom.Histogram({
      name: `${p}delivery_duration_seconds`,
      help: 'Time of one delivery attempt: the handler call, or the webhook request.',
      labelNames: ['consumer'],
      buckets,
      registers,
    });
    const round = new prom.Histogram({
      name: `${p}relay_round_duration_seconds`,
      help: 'Time of one relay round over every tenant with due work.',
      buckets,
      registers,
    });
    const batch = new prom.Histogram({
      name: `${p}relay_claimed_batch_size`,
      help: 'Deliveries claimed per batch (one tenant, one claim).',
      buckets: BATCH_BUCKETS,
      registers,
    });
    const recoveries = new prom.Counter({
      name: `${p}lease_recoveries_total`,
      help: 'Deliveries claimed again because the lease of an earlier attempt expired (its relay died or stalled).',
      labelNames: ['consumer'],
      registers,
    });
    const rolledBack = new prom.Counter({
      name: `${p}batches_rolled_back_total`,
      help: 'In-process batches whose transaction failed (e.g. a lease lost); their attempts are counted again as failures.',
      registers,
    });
    const fanOuts = new prom.Counter({
      name: `${p}relay_fan_outs_total`,
      help: 'Claims of new events that took the fan-out rather than the lean claim, by reason (docs/adr/0804).',
      labelNames: ['reason'],
      registers,
    });
    const webhooks = this.webhooks;
    const consumerLabel = (name: string): string => this.consumerLabel(name);
    new prom.Gauge({
      name: `${p}webhook_circuits`,
      help: 'Webhook endpoints per consumer and circuit state (closed, open, halfOpen), as this instance sees them.',
      labelNames: ['consumer', 'state'],
      registers,
      collect(this: PromClient.Gauge<'consumer' | 'state'>) {
        this.reset();
        for (const circuit of webhooks?.circuitStates() ?? [])
          this.inc({ consumer: consumerLabel(circuit.consumer), state: circuit.state });
      },
    });
    if (this.options.oldestPendingAge !== false) {
      const store = this.store;
      const { names, registry } = this.outboxOptions;
      const logger = this.logger;
      // from where this instance's last reading proved nothing pending below
      const pendingAge = new PendingAgeReadings();
      new prom.Gauge({
        name: `${p}oldest_pending_age_seconds`,
        help: 'Age of the oldest work not done across every tenant (pending events, pending or failed deliveries).',
        registers,
        async collect(this: PromClient.Gauge) {
          try {
            // bounded: a scrape that never gets its reply would hold a pool connection for good
            const [row] = await store.relayQuery<OldestPendingAgeRow>(
              pendingAge.statement(names, registry.orphanAfterMs),
              'metrics',
            );
            this.set(Math.max(0, row ? pendingAge.record(row) : 0));
          } catch (error) {
            logger.warn(`could not read the oldest pending age: ${errorText(error)}`);
          }
        },
      });
    }

    this.detach = this.instrumentation.add({
      eventsEnqueued: (events) => {
        for (const e of events) enqueued.inc(this.labels({ event_name: e.eventName }, e.tenantId));
      },
      roundEnded: ({ durationMs, tenants }) => {
        if (tenants > 0) round.observe(durationMs / 1000);
      },
      batchClaimed: ({ deliveries: claimed, fanOut }) => {
        if (claimed.length > 0) batch.observe(claimed.length);
        if (fanOut) fanOuts.inc({ reason: fanOut });
        for (const d of claimed)
          if (d.recovered) recoveries.inc({ consumer: this.consumerLabel(d.consumerName) });
      },
      batchRolledBack: () => rolledBack.inc(),
      attemptStarted: (delivery, consumer) => {
        const started = performance.now();
        const label = this.consumerLabel(consumer.name);
        return {
          ended: (outcome) => {
            deliveries.inc(
              this.labels({ consumer: label, outcome: outcome.status }, delivery.event.tenantId),
            );
            if (outcome.status !== 'deferred')
              duration.observe({ consumer: label }, (performance.now() - started) / 1000);
          },
        };
      },
    });
  }

  onModuleDestroy(): void {
    this.detach?.();
    this.detach = null;
  }

  /** Adds the tenant label when on: the first `maxTenants` tenants by name, the rest as "other". */
  private labels<T extends Record<string, string>>(
    labels: T,
    tenantId: string,
  ): T | (T & { tenant: string }) {
    if (!this.tenantsLabelled) return labels;
    return { ...labels, tenant: this.tenantsLabelled.of(tenantId, OTHER_TENANTS) };
  }

  /**
   * The `consumer` label of a consumer: its name when the app hosts it (the operator named it in code), its kind
   * otherwise — a tenant named it, and a label value per tenant-chosen name would let tenants add series without
   * bound. With `subscriptionLabel`, the first `maxSubscriptions` of those keep their name.
   */
  private consumerLabel(name: string): string {
    if (this.consumers.get(name)) return name;
    const kind = isSubscriptionConsumer(name) ? SUBSCRIPTION_CONSUMERS : TENANT_CONSUMERS;
    return this.subscriptionsLabelled ? this.subscriptionsLabelled.of(name, kind) : kind;
  }
}
