import { Module, type DynamicModule } from '@nestjs/common';
import { OUTBOX_TRACING_OPTIONS, OutboxTracing } from './outbox-tracing';
import type { OutboxTracingModuleOptions } from './outbox-tracing-options.interface';

/**
 * OpenTelemetry tracing of the outbox through `@opentelemetry/api` (an optional peer dependency, loaded only when
 * this module is imported): `OutboxTracingModule.forRoot()` next to `OutboxModule`. Spans go to whatever tracer
 * provider the app registered (the OpenTelemetry SDK); without one they are no-ops. Needs the migration that adds
 * `event_outbox.traceparent`.
 */
@Module({})
export class OutboxTracingModule {
  /** Spans per delivery attempt, trace context stored at enqueue, `traceparent` on webhook requests. */
  static forRoot(options: OutboxTracingModuleOptions = {}): DynamicModule {
    return {
      module: OutboxTracingModule,
      providers: [{ provide: OUTBOX_TRACING_OPTIONS, useValue: options }, OutboxTracing],
    };
  }
}
