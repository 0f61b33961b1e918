import type {
  OutboxWebhookOptions,
  OutboxWebhookSubscriptionsOptions,
} from './outbox-webhook-options.interface';

/**
 * Options of `OutboxWebhooksModule.forRoot()` / `forRootAsync()` (`nestjs-pg-outbox/webhooks`; `isGlobal` is given
 * to `forRoot()` or next to `useFactory`, not returned by it). The module needs `OutboxModule` imported.
 */
export interface OutboxWebhooksModuleOptions {
  /** HTTP endpoints that receive events, each a consumer named `webhook:<name>`. Default: `[]`. */
  webhooks?: OutboxWebhookOptions[];
  /** Webhook subscriptions that tenants add at run time (`OutboxWebhookSubscriptions`). */
  subscriptions?: OutboxWebhookSubscriptionsOptions;
  /**
   * Register the module's services (`OutboxWebhookService`, `OutboxWebhookSubscriptions`) for every module; with
   * `false`, import the module where they are injected. Default: `true`.
   */
  isGlobal?: boolean;
}

/** The webhook options after defaults were merged and checked. */
export interface ResolvedOutboxWebhooksOptions {
  webhooks: readonly OutboxWebhookOptions[];
  subscriptions: Required<OutboxWebhookSubscriptionsOptions>;
}
