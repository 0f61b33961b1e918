import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the board's search and its hours-long charts need (docs/adr/1013-search-bulk-actions-and-hours-of-activity.md).
 * Frozen history: literal SQL, nothing imported from libs/.
 *
 * - No index on `event_outbox`: the three search indexes (by event name, aggregate, correlation id) are opt-in,
 *   `npx nestjs-pg-outbox sql --search-indexes` (every event's insert and status update would write them, for a
 *   rare search; ADR 1013). `down` drops them when an operator created them.
 * - `outbox_record_activity` keeps 24 hours of per-minute activity instead of 2, for the charts of the last 6 and
 *   24 hours (the same rows, read in 5- and 20-minute buckets).
 */
export class OutboxEventSearch1764501500000 implements MigrationInterface {
  name = 'OutboxEventSearch1764501500000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(recordActivityFunction('24 hours'));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(recordActivityFunction('2 hours'));
    await q.query(`drop index if exists public.event_outbox_correlation_idx`);
    await q.query(`drop index if exists public.event_outbox_aggregate_idx`);
    await q.query(`drop index if exists public.event_outbox_name_idx`);
  }
}

/** `outbox_record_activity` as migration OutboxBoard1764500100000 created it, keeping minutes for `kept`. */
function recordActivityFunction(kept: string): string {
  return `
    create or replace function public.outbox_record_activity(
      tenants uuid[], minutes timestamptz[], consumers text[],
      delivered integer[], failed integer[], dead integer[], deferred integer[]
    ) returns void
    language sql volatile security definer set search_path = pg_catalog, public as $$
      insert into public.outbox_activity as a (tenant_id, minute, consumer_name, delivered, failed, dead, deferred)
      select * from unnest(tenants, minutes, consumers, delivered, failed, dead, deferred)
      on conflict (tenant_id, minute, consumer_name) do update
        set delivered = a.delivered + excluded.delivered, failed = a.failed + excluded.failed,
            dead = a.dead + excluded.dead, deferred = a.deferred + excluded.deferred;
      delete from public.outbox_activity where minute < now() - interval '${kept}';
    $$`;
}
