import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { OutboxModuleOptions } from './outbox-module-options.interface';

/** Builds `OutboxModule.forRoot()` / `forRootAsync()`; the module is global unless `isGlobal: false`. */
export const {
  ConfigurableModuleClass: ConfigurableOutboxModule,
  MODULE_OPTIONS_TOKEN: OUTBOX_MODULE_OPTIONS,
  OPTIONS_TYPE: OUTBOX_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: OUTBOX_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<OutboxModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createOutboxOptions')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** Token of the options after defaults were merged and checked. */
export const OUTBOX_RESOLVED_OPTIONS = Symbol('OUTBOX_RESOLVED_OPTIONS');
