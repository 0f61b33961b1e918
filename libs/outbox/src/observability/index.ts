export { OutboxMetricsModule } from './metrics/outbox-metrics.module';
export { OutboxMetrics } from './metrics/outbox-metrics';
export { OutboxTracingModule } from './tracing/outbox-tracing.module';
export type { OutboxTracingModuleOptions } from './tracing/outbox-tracing-options.interface';
export type {
  OutboxMetricsModuleOptions,
  OutboxMetricsRegistry,
} from './metrics/outbox-metrics-options.interface';
