import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_consumer_instances.started_at`: when each relay instance started, by the database's clock (its first
 * heartbeat). The limits of the newest instance (`outbox_consumers.limits_from`) hold only while an instance that
 * started that late still reports: once it left (a canary removed, a switch back to the old deployment) or stopped
 * reporting for three heartbeats, the next beat of an instance still running writes its own limits
 * (docs/adr/1104-consumer-limits-in-the-database.md, "Amended 2026-12-06"). Nullable without a default: a
 * catalog-only change; an instance of an older release leaves it null and never holds limits in place.
 * Frozen history: literal SQL.
 */
export class OutboxConsumerInstanceStart1764502500000 implements MigrationInterface {
  name = 'OutboxConsumerInstanceStart1764502500000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.outbox_consumer_instances add column started_at timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.outbox_consumer_instances drop column if exists started_at`);
  }
}
