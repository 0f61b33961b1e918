export { OutboxWebhookService } from './outbox-webhook.service';
export { OutboxWebhookSubscriptions } from './outbox-webhook-subscriptions.service';
export {
  verifyWebhook,
  generateWebhookSecret,
  type VerifyWebhookOptions,
  type WebhookRequestHeaders,
} from './webhook-signature';
export {
  OutboxWebhookVerificationError,
  type WebhookVerificationFailure,
} from './webhook-verification.error';
export type { OutboxWebhookEnvelope } from './webhook-envelope';
export { WEBHOOK_HEADERS, WEBHOOK_RUN_ID_HEADER } from './webhook-headers';
export { WEBHOOK_ERROR_CODES } from './webhook-outcome';
export type {
  OutboxWebhookOptions,
  OutboxWebhookCircuitBreakerOptions,
  OutboxWebhookSubscriptionsOptions,
  OutboxSecretKey,
  OutboxWebhookSubscriptionInput,
  OutboxWebhookSubscription,
  OutboxWebhookCircuitState,
} from './outbox-webhook-options.interface';
export { OutboxWebhooksModule } from './outbox-webhooks.module';
export type { OutboxWebhooksModuleOptions } from './outbox-webhooks-options.interface';
