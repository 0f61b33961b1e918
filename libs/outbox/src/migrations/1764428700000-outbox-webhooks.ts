import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook subscriptions that tenants register at run time. Frozen history: literal SQL.
 *
 * Row-level security as on the other tenant tables (roles `outbox_app` and `outbox_relay`, the transaction-local
 * `app.current_tenant_id`); the relay and the admin API (role `outbox_relay`) read and write it. The unique key
 * (tenant_id, name) makes consumer names `subscription:<name>` unique per tenant and serves the relay's
 * per-tenant lookup. The signing secret is stored as given: the relay needs it to sign.
 */
export class OutboxWebhooks1764428700000 implements MigrationInterface {
  name = 'OutboxWebhooks1764428700000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.outbox_webhook_subscriptions (
        id uuid primary key,
        tenant_id uuid not null,
        name text not null,
        url text not null,
        events text[] not null,
        secret text,
        options jsonb not null default '{}'::jsonb,
        status text not null default 'active',
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint outbox_webhook_subscriptions_tenant_name_key unique (tenant_id, name),
        constraint outbox_webhook_subscriptions_status_check check (status in ('active', 'paused'))
      )`);
    await q.query(`alter table public.outbox_webhook_subscriptions enable row level security`);
    await q.query(`
      create policy outbox_webhook_subscriptions_tenant_isolation on public.outbox_webhook_subscriptions
        to outbox_app, outbox_relay
        using (tenant_id = nullif(current_setting('app.current_tenant_id', true), '')::uuid)
        with check (tenant_id = nullif(current_setting('app.current_tenant_id', true), '')::uuid)`);
    await q.query(`grant select, insert, update, delete on public.outbox_webhook_subscriptions to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`revoke all on public.outbox_webhook_subscriptions from outbox_relay`);
    await q.query(`drop table if exists public.outbox_webhook_subscriptions`);
  }
}
