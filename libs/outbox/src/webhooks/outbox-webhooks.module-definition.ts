import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { OutboxWebhooksModuleOptions } from './outbox-webhooks-options.interface';

/** Builds `OutboxWebhooksModule.forRoot()` / `forRootAsync()`; the module is global unless `isGlobal: false`. */
export const {
  ConfigurableModuleClass: ConfigurableOutboxWebhooksModule,
  MODULE_OPTIONS_TOKEN: OUTBOX_WEBHOOKS_MODULE_OPTIONS,
  OPTIONS_TYPE: OUTBOX_WEBHOOKS_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: OUTBOX_WEBHOOKS_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<Omit<OutboxWebhooksModuleOptions, 'isGlobal'>>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createOutboxWebhooksOptions')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** Token of the webhook options after defaults were merged (problems travel with {@link OUTBOX_WEBHOOKS_RESOLUTION}). */
export const OUTBOX_WEBHOOKS_RESOLVED_OPTIONS = Symbol('OUTBOX_WEBHOOKS_RESOLVED_OPTIONS');

/** Token of the merged webhook options together with the problems found in them. */
export const OUTBOX_WEBHOOKS_RESOLUTION = Symbol('OUTBOX_WEBHOOKS_RESOLUTION');
