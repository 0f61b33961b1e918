import { ConfigurableModuleBuilder } from '@nestjs/common';
import { messages } from '../errors/outbox.messages';
import type { OutboxBrokersModuleOptions } from './outbox-brokers-module-options.interface';

/** Builds `OutboxBrokersModule.forRoot()` / `forRootAsync()`; the module is global unless `isGlobal: false`. */
export const {
  ConfigurableModuleClass: ConfigurableOutboxBrokersModule,
  MODULE_OPTIONS_TOKEN: OUTBOX_BROKERS_MODULE_OPTIONS,
  OPTIONS_TYPE: OUTBOX_BROKERS_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: OUTBOX_BROKERS_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<OutboxBrokersModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createOutboxBrokersOptions')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();

/** One list option of the module (`brokers` or `transports`): its entries, or a problem when it is not an array. */
export function listOption<T>(
  options: OutboxBrokersModuleOptions | null | undefined,
  list: 'brokers' | 'transports',
  problems: string[],
): readonly T[] {
  const given: unknown = options?.[list];
  if (given === undefined) return [];
  if (Array.isArray(given)) return given as T[];
  problems.push(messages.badOption(list, `an array of ${list}`, given));
  return [];
}
