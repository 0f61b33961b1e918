import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_consumers.limits_from`: when the relay instance whose limits a consumer's row holds started. A heartbeat
 * writes its instance's limits (concurrency, rate) only when its instance started at that time or later, so during
 * a rolling deploy the instances started last — the new version — set the limits, and an older instance that
 * declares other limits (or none) no longer overwrites them on each beat. Every relay's due claim reads the
 * limits from this row (docs/adr/1104-consumer-limits-in-the-database.md, "Amended 2026-12-06"). Nullable without
 * a default: a catalog-only change; null (a row written before, or by an older release) is older than any start.
 * Frozen history: literal SQL.
 */
export class OutboxConsumerLimitsFrom1764502050000 implements MigrationInterface {
  name = 'OutboxConsumerLimitsFrom1764502050000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.outbox_consumers add column limits_from timestamptz`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.outbox_consumers drop column if exists limits_from`);
  }
}
