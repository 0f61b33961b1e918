import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-key rate limits (`rateLimit.perKey`, issue 36, docs/flow-control.md). `outbox_consumers.rate_key` says what
 * a consumer's rate limit counts per within each tenant: `'aggregate'` or `'payload:<path>'`; null: not per key.
 * `outbox_consumer_key_starts` is the rate log per key: one row per claim and key (when, how many), the key as the
 * md5 of its value (no event data here, and a fixed size whatever the key). The claim of a keyed consumer holds its
 * tenant's turn (`outbox_consumer_limits`), reads the rows of the last interval, appends its own and deletes those
 * older than the interval: a key's rows go once its window passed. The primary key serves those reads and deletes
 * (consumer, tenant, time). See docs/adr/1104-consumer-limits-in-the-database.md ("Amended 2026-12-06: per key").
 * Not tenant-scoped by row-level security: a row names a consumer, a tenant and a digest. Frozen history: literal
 * SQL.
 */
export class OutboxConsumerKeyLimits1764502800000 implements MigrationInterface {
  name = 'OutboxConsumerKeyLimits1764502800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.outbox_consumers add column rate_key text`);
    await q.query(`
      create table public.outbox_consumer_key_starts (
        consumer_name text not null,
        tenant_id uuid not null,
        -- md5 of the key's value
        rate_key uuid not null,
        started_at timestamptz not null,
        n integer not null,
        constraint outbox_consumer_key_starts_pkey primary key (consumer_name, tenant_id, started_at, rate_key)
      )`);
    await q.query(`grant select, insert, update, delete on public.outbox_consumer_key_starts to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop table if exists public.outbox_consumer_key_starts`);
    await q.query(`alter table public.outbox_consumers drop column if exists rate_key`);
  }
}
