-- nestjs-pg-outbox migration 0002-outbox-tenancy (up), recorded from the TypeORM class OutboxTenancy1764428600000. Do not edit.
do $$ begin
          if not exists (select from pg_roles where rolname = 'outbox_app') then
            create role outbox_app nologin;
          end if;
        exception when duplicate_object or unique_violation then
          null; -- another database of this cluster created it at the same moment
        end $$;

do $$ begin
          if not exists (select from pg_roles where rolname = 'outbox_relay') then
            create role outbox_relay nologin;
          end if;
        exception when duplicate_object or unique_violation then
          null; -- another database of this cluster created it at the same moment
        end $$;

create table public.outbox_consumers (
        name text primary key,
        event_patterns text[] not null,
        kind text not null default 'handler',
        ordered boolean not null default false,
        first_seen_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now()
      );

create table public.outbox_consumer_instances (
        consumer_name text not null references public.outbox_consumers (name) on delete cascade,
        instance_id text not null,
        last_seen_at timestamptz not null default now(),
        constraint outbox_consumer_instances_pkey primary key (consumer_name, instance_id)
      );

alter table public.event_outbox enable row level security;

create policy event_outbox_tenant_isolation on public.event_outbox
          to outbox_app, outbox_relay
          using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)
          with check (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid);

alter table public.outbox_deliveries enable row level security;

create policy outbox_deliveries_tenant_isolation on public.outbox_deliveries
          to outbox_app, outbox_relay
          using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)
          with check (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid);

alter table public.consumer_inbox enable row level security;

create policy consumer_inbox_tenant_isolation on public.consumer_inbox
          to outbox_app, outbox_relay
          using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)
          with check (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid);

grant usage on schema public to outbox_app, outbox_relay;

grant insert on public.event_outbox to outbox_app;

grant select, insert, update, delete on public.event_outbox, public.outbox_deliveries, public.consumer_inbox to outbox_relay;

grant select, insert, update, delete on public.outbox_consumers, public.outbox_consumer_instances to outbox_relay;

revoke all on function public.outbox_due_tenants(integer, uuid) from public;

grant execute on function public.outbox_due_tenants(integer, uuid) to outbox_relay;

create function public.outbox_purge_settled(older_than timestamptz, max_events integer) returns integer
      language sql volatile security definer set search_path = pg_catalog, public as $$
        with doomed as (
          select id from public.event_outbox
           where status in ('published', 'no_handlers') and published_at < older_than
           order by published_at
           limit max_events
             for update skip locked
        ), inbox as (
          delete from public.consumer_inbox i using doomed where i.event_id = doomed.id
        ), deliveries as (
          delete from public.outbox_deliveries d using doomed where d.event_id = doomed.id
        ), events as (
          delete from public.event_outbox e using doomed where e.id = doomed.id returning 1
        )
        select count(*)::int from events
      $$;

revoke all on function public.outbox_purge_settled(timestamptz, integer) from public;

grant execute on function public.outbox_purge_settled(timestamptz, integer) to outbox_relay;
