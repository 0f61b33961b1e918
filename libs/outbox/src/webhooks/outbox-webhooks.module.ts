import { Module, type Provider } from '@nestjs/common';
import { OUTBOX_RESOLVED_OPTIONS } from '../options/outbox.module-definition';
import type { ResolvedOutboxOptions } from '../options/outbox-module-options.interface';
import {
  ConfigurableOutboxWebhooksModule,
  OUTBOX_WEBHOOKS_MODULE_OPTIONS,
  OUTBOX_WEBHOOKS_RESOLUTION,
  OUTBOX_WEBHOOKS_RESOLVED_OPTIONS,
} from './outbox-webhooks.module-definition';
import { resolveOutboxWebhooksOptions, type OutboxWebhooksResolution } from './outbox-webhooks-options';
import type { OutboxWebhooksModuleOptions } from './outbox-webhooks-options.interface';
import { WebhookTargetGuard } from './webhook-target-guard';
import { SubscriptionSecretCipher } from './subscription-secret-cipher';
import { WebhookSender } from './webhook-sender';
import { OutboxWebhookService } from './outbox-webhook.service';
import { WebhookConsumerFactory } from './webhook-consumer.factory';
import { WebhookSubscriptionSource } from './webhook-subscription.source';
import { OutboxWebhookSubscriptions } from './outbox-webhook-subscriptions.service';

/** The module's options merged once; their problems fail `app.init()` with the other wiring problems. */
const optionsProviders: Provider[] = [
  {
    provide: OUTBOX_WEBHOOKS_RESOLUTION,
    useFactory: (
      raw: OutboxWebhooksModuleOptions | undefined,
      core: ResolvedOutboxOptions,
    ): OutboxWebhooksResolution => resolveOutboxWebhooksOptions(raw, core),
    inject: [OUTBOX_WEBHOOKS_MODULE_OPTIONS, OUTBOX_RESOLVED_OPTIONS],
  },
  {
    provide: OUTBOX_WEBHOOKS_RESOLVED_OPTIONS,
    useFactory: (resolution: OutboxWebhooksResolution) => resolution.options,
    inject: [OUTBOX_WEBHOOKS_RESOLUTION],
  },
];

/**
 * Webhooks: static HTTP endpoints (`webhooks`, each a consumer `webhook:<name>`) and the subscriptions tenants
 * add at run time (`OutboxWebhookSubscriptions`). Import next to `OutboxModule.forRoot(…)`:
 * `OutboxWebhooksModule.forRoot({ webhooks: [ … ], subscriptions: { secretKeys } })` or `forRootAsync(…)`;
 * global unless `isGlobal: false`. See docs/webhooks.md.
 */
@Module({
  providers: [
    ...optionsProviders,
    WebhookTargetGuard,
    SubscriptionSecretCipher,
    WebhookSender,
    OutboxWebhookService,
    WebhookConsumerFactory,
    WebhookSubscriptionSource,
    OutboxWebhookSubscriptions,
  ],
  exports: [OutboxWebhookService, OutboxWebhookSubscriptions, WebhookSubscriptionSource],
})
export class OutboxWebhooksModule extends ConfigurableOutboxWebhooksModule {}
