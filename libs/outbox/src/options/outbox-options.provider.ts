import type { Provider } from '@nestjs/common';
import { OUTBOX_MODULE_OPTIONS, OUTBOX_RESOLVED_OPTIONS } from './outbox.module-definition';
import { resolveOutboxOptions, type OptionsResolution } from './outbox-options';
import type { OutboxModuleOptions } from './outbox-module-options.interface';

/** Token of the merged options together with the problems found in them. */
export const OUTBOX_OPTIONS_RESOLUTION = Symbol('OUTBOX_OPTIONS_RESOLUTION');

/** Merges defaults once; the explorer reports problems at init, with the other wiring problems. */
export const outboxOptionsProviders: Provider[] = [
  {
    provide: OUTBOX_OPTIONS_RESOLUTION,
    useFactory: (raw: OutboxModuleOptions | undefined): OptionsResolution => resolveOutboxOptions(raw ?? {}),
    inject: [OUTBOX_MODULE_OPTIONS],
  },
  {
    provide: OUTBOX_RESOLVED_OPTIONS,
    useFactory: (resolution: OptionsResolution) => resolution.options,
    inject: [OUTBOX_OPTIONS_RESOLUTION],
  },
];
