import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Backfills: a consumer that joins late gets the delivery rows of retained events it never had, in chunks (see
 * `OutboxBackfill` and docs/adr/1011-backfill-for-late-consumers.md). One row per backfill, keyed by an id
 * derived from what it covers (consumer, tenant, since, event names), so running the same backfill again resumes
 * it, and a finished one is not repeated. Each chunk commits its delivery rows and the row's `position_id` (the
 * last event id it looked at, ids being UUIDv7) together. While a backfill of an ordered consumer is not finished,
 * the claim holds that consumer's deliveries back, so its history comes before new events of the same aggregate.
 * Not tenant-scoped by row-level security: a row names a consumer and a tenant, no event data. Frozen history:
 * literal SQL.
 */
export class OutboxBackfills1764500900000 implements MigrationInterface {
  name = 'OutboxBackfills1764500900000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.outbox_backfills (
        id uuid primary key,
        consumer_name text not null,
        -- null: every tenant the connection sees
        tenant_id uuid,
        since timestamptz,
        event_names text[],
        -- the largest event id when the backfill started: later events fan out to the consumer
        horizon_id uuid,
        position_id uuid,
        created_rows bigint not null default 0,
        chunks integer not null default 0,
        started_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        finished_at timestamptz
      )`);
    await q.query(
      `create index outbox_backfills_open_idx on public.outbox_backfills (consumer_name) where finished_at is null`,
    );
    await q.query(`grant select, insert, update on public.outbox_backfills to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop table if exists public.outbox_backfills`);
  }
}
