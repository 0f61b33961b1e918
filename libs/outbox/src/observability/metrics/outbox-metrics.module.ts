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
    const cap = this.options.tenantLabel;
    if (cap !== undefined && cap !== false && !(Number.isSafeInteger(cap?.maxTenants) && cap.maxTenants >= 1))
      throw new OutboxConfigurationError([
        messages.badOption('OutboxMetricsModule tenantLabel', 'false or { maxTenants: an integer ≥ 1 }', cap),
      ]);
  }
}
