/** A prom-client `Registry` (typed by shape, so the package's types compile without prom-client installed). */
export interface OutboxMetricsRegistry {
  registerMetric(metric: never): void;
  metrics(): Promise<string>;
}

/** Options of `OutboxMetricsModule.forRoot()`. */
export interface OutboxMetricsModuleOptions {
  /**
   * The prom-client `Registry` to register the outbox's metrics on: pass your app's (e.g. prom-client's default
   * `register`, which `@willsoto/nestjs-prometheus` serves). Default: a registry of the module's own, read from
   * `OutboxMetrics.registry`.
   */
  registry?: OutboxMetricsRegistry;
  /** Prefix of every metric name. Default: `'outbox_'`. */
  prefix?: string;
  /**
   * A `tenant` label on `events_enqueued_total` and `deliveries_total`, for at most `maxTenants` tenants (the
   * first seen by this instance); every other tenant is counted under `tenant="other"`. Each tenant multiplies
   * those series by the number of event names and consumers, hence the cap. Default: `false`.
   */
  tenantLabel?: false | { maxTenants: number };
  /**
   * The `consumer` label of consumers a tenant names: webhook subscriptions (and those of a `TenantConsumerSource`
   * of your own). Off, every one is labelled by its kind, `webhook-subscription` (or `tenant-consumer`), so a
   * tenant cannot add series. `{ maxSubscriptions }` labels the first that many seen by this instance with their
   * consumer name (`subscription:<name>`) and the rest by kind: at most `maxSubscriptions` + 1 values, each
   * multiplying the series of every metric with a `consumer` label (docs/observability.md). Default: `false`.
   */
  subscriptionLabel?: false | { maxSubscriptions: number };
  /** Buckets of `delivery_duration_seconds` and `relay_round_duration_seconds`, in seconds. Default: `[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]`. */
  durationBuckets?: number[];
  /** Refresh `oldest_pending_age_seconds` (a database query) when scraped. Default: `true`. */
  oldestPendingAge?: boolean;
}
