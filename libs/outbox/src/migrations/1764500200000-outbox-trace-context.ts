import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `event_outbox.traceparent`: the W3C trace context active when the event was enqueued, so the consumer span of
 * its first delivery is a child of the producer's trace (and retries link to it). Written only when the app
 * imports the tracing module; null otherwise. Nullable without a default: adding it rewrites no row. Frozen
 * history: literal SQL.
 */
export class OutboxTraceContext1764500200000 implements MigrationInterface {
  name = 'OutboxTraceContext1764500200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.event_outbox add column traceparent text`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.event_outbox drop column if exists traceparent`);
  }
}
