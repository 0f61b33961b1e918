import { Controller, Get, Header, Inject } from '@nestjs/common';
import type { Registry } from 'prom-client';

/** Token of the demo's prom-client registry (one per app: `AppModule.forRoot` makes it). */
export const DEMO_METRICS_REGISTRY = Symbol('DEMO_METRICS_REGISTRY');

/** `GET /metrics`: the demo's Prometheus registry, the outbox's metrics on it. */
@Controller('metrics')
export class DemoMetricsController {
  constructor(@Inject(DEMO_METRICS_REGISTRY) private readonly registry: Registry) {}

  @Get()
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(): Promise<string> {
    return this.registry.metrics();
  }
}
