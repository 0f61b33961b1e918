-- nestjs-pg-outbox migration 0023-outbox-consumer-limits (up), recorded from the TypeORM class OutboxConsumerLimits1764501700000. Do not edit.
alter table public.outbox_consumers
        add column concurrency integer,
        add column tenant_concurrency integer,
        add column rate_limit integer,
        add column rate_interval_ms integer,
        add column rate_per_tenant boolean not null default false;

create table public.outbox_consumer_limits (
        consumer_name text not null,
        -- the nil tenant: the consumer's limits over every tenant
        tenant_id uuid not null,
        -- the claims of the last rate interval: when, and how many deliveries each started
        started_at timestamptz[] not null default '{}',
        started_n integer[] not null default '{}',
        constraint outbox_consumer_limits_pkey primary key (consumer_name, tenant_id)
      );

grant select, insert, update, delete on public.outbox_consumer_limits to outbox_relay;

create function public.outbox_consumer_in_flight(consumer text, tenant uuid default null)
      returns integer
      language sql stable security definer set search_path = pg_catalog, public as $$
        select count(*)::integer from public.outbox_deliveries d
         where d.status = 'processing' and d.lease_expires_at > now() and d.consumer_name = consumer
           and (tenant is null or d.tenant_id = tenant)
      $$;

revoke all on function public.outbox_consumer_in_flight(text, uuid) from public;

grant execute on function public.outbox_consumer_in_flight(text, uuid) to outbox_relay;
