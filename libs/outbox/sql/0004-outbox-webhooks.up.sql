-- nestjs-pg-outbox migration 0004-outbox-webhooks (up), recorded from the TypeORM class OutboxWebhooks1764428700000. Do not edit.
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
      );

alter table public.outbox_webhook_subscriptions enable row level security;

create policy outbox_webhook_subscriptions_tenant_isolation on public.outbox_webhook_subscriptions
        to outbox_app, outbox_relay
        using (tenant_id = nullif(current_setting('app.current_tenant_id', true), '')::uuid)
        with check (tenant_id = nullif(current_setting('app.current_tenant_id', true), '')::uuid);

grant select, insert, update, delete on public.outbox_webhook_subscriptions to outbox_relay;
