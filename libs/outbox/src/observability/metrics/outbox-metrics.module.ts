import { Inject, Module, type DynamicModule, type OnModuleInit } from '@nestjs/common';
import { OutboxConfigurationError } from '../../errors/outbox.error';
import { messages } from '../../errors/outbox.messages';
import { OUTBOX_METRICS_OPTIONS, OutboxMetrics } from './outbox-metrics';
import type { OutboxMetricsModuleOptions } from './outbox-metrics-options.interface';

/**
 * Prometheus metrics of the outbox through prom-client (an optional peer dependency, loaded only when this module
 * is imported): `OutboxMetricsModule.forRoot({ registry })` next to `OutboxModule`. Serve the registry at your
 * `/metrics` route (or let `@willsoto/nestjs-prometheus` serve prom-client's default `register`).
 */
@Module({})
export class OutboxMetricsModule implements OnModuleInit {
  constructor(@Inject(OUTBOX_METRICS_OPTIONS) private readonly options: OutboxMetricsModuleOptions) {}

  /** The metrics on `options.registry` (or a registry of the module's own). */
  static forRoot(options: OutboxMetricsModuleOptions = {}): DynamicModule {
    return {
      module: OutboxMetricsModule,
      providers: [{ provide: OUTBOX_METRICS_OPTIONS, useValue: options }, OutboxMetrics],
      exports: [OutboxMetrics],
    };
  }

  onModuleInit(): void {
    const problems = [
      ...capProblems('tenantLabel', 'maxTenants', this.options.tenantLabel),
      ...capProblems('subscriptionLabel', 'maxSubscriptions', this.options.subscriptionLabel),
    ];
    if (problems.length > 0) throw new OutboxConfigurationError(problems);
  }
}

/** A label cap option is `false` (or left out) or `{ [key]: an integer ≥ 1 }`. */
function capProblems(option: string, key: string, value: unknown): string[] {
  if (value === undefined || value === false) return [];
  const max = (value as Record<string, unknown> | null)?.[key];
  if (typeof value === 'object' && typeof max === 'number' && Number.isSafeInteger(max) && max >= 1)
    return [];
  return [messages.badOption(`OutboxMetricsModule ${option}`, `false or { ${key}: an integer ≥ 1 }`, value)];
}
