import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-consumer concurrency and rate limits (issue 36, docs/flow-control.md). The limits a consumer's decorator
 * sets go to its row of the persisted registry (`outbox_consumers`), so every relay reads the same ones.
 * `outbox_consumer_limits` holds one row per limited consumer and tenant (the nil tenant: every tenant): the claim
 * of a limited consumer's deliveries locks it first (`for update`), so claims of that consumer take turns, and it
 * keeps the starts of the last interval (a log of claims: when, how many) for the rate limit.
 * `outbox_consumer_in_flight` counts a consumer's deliveries under a live lease across tenants, past row-level
 * security, as `outbox_due_tenants` looks across tenants. See docs/adr/1104-consumer-limits-in-the-database.md.
 * Not tenant-scoped by row-level security: a row names a consumer and a tenant, no event data. Frozen history:
 * literal SQL.
 */
export class OutboxConsumerLimits1764501700000 implements MigrationInterface {
  name = 'OutboxConsumerLimits1764501700000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      alter table public.outbox_consumers
        add column concurrency integer,
        add column tenant_concurrency integer,
        add column rate_limit integer,
        add column rate_interval_ms integer,
        add column rate_per_tenant boolean not null default false`);
    await q.query(`
      create table public.outbox_consumer_limits (
        consumer_name text not null,
        -- the nil tenant: the consumer's limits over every tenant
        tenant_id uuid not null,
        -- the claims of the last rate interval: when, and how many deliveries each started
        started_at timestamptz[] not null default '{}',
        started_n integer[] not null default '{}',
        constraint outbox_consumer_limits_pkey primary key (consumer_name, tenant_id)
      )`);
    await q.query(`grant select, insert, update, delete on public.outbox_consumer_limits to outbox_relay`);
    await q.query(`
      create function public.outbox_consumer_in_flight(consumer text, tenant uuid default null)
      returns integer
      language sql stable security definer set search_path = pg_catalog, public as $$
        select count(*)::integer from public.outbox_deliveries d
         where d.status = 'processing' and d.lease_expires_at > now() and d.consumer_name = consumer
           and (tenant is null or d.tenant_id = tenant)
      $$`);
    await q.query(`revoke all on function public.outbox_consumer_in_flight(text, uuid) from public`);
    await q.query(`grant execute on function public.outbox_consumer_in_flight(text, uuid) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_consumer_in_flight(text, uuid)`);
    await q.query(`drop table if exists public.outbox_consumer_limits`);
    await q.query(`
      alter table public.outbox_consumers
        drop column if exists concurrency,
        drop column if exists tenant_concurrency,
        drop column if exists rate_limit,
        drop column if exists rate_interval_ms,
        drop column if exists rate_per_tenant`);
  }
}
