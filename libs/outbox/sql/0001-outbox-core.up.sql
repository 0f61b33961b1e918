-- nestjs-pg-outbox migration 0001-outbox-core (up), recorded from the TypeORM class OutboxCore1764428400000. Do not edit.
create table public.event_outbox (
        id uuid primary key,
        seq bigint generated always as identity,
        tenant_id uuid not null,
        event_name text not null,
        payload jsonb not null,
        aggregate_type text,
        aggregate_id text,
        occurred_at timestamptz not null default now(),
        correlation_id text,
        schema_version integer not null default 1,
        status text not null default 'pending',
        attempts integer not null default 0,
        error_message text,
        failed_at timestamptz,
        published_at timestamptz,
        deliveries_open integer not null default 0,
        deliveries_dead integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint event_outbox_status_check
          check (status in ('pending', 'processing', 'published', 'failed', 'no_handlers'))
      );

create index event_outbox_pending_idx on public.event_outbox (tenant_id, seq) where status = 'pending';

create index event_outbox_failed_idx on public.event_outbox (tenant_id, failed_at) where status = 'failed';

create index event_outbox_settled_idx on public.event_outbox (published_at) where status in ('published', 'no_handlers');

create table public.outbox_deliveries (
        id bigint generated always as identity primary key,
        event_id uuid not null,
        tenant_id uuid not null,
        consumer_name text not null,
        event_seq bigint not null,
        -- set for consumers that want per-aggregate order: tenant-local '<aggregate_type>:<aggregate_id>'
        aggregate_key text,
        status text not null default 'pending',
        attempt_count integer not null default 0,
        last_error text,
        error_code text,
        next_attempt_at timestamptz not null default now(),
        lease_token uuid,
        lease_expires_at timestamptz,
        external_run_id text,
        processed_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        constraint outbox_deliveries_event_consumer_key unique (event_id, consumer_name),
        constraint outbox_deliveries_status_check
          check (status in ('pending', 'processing', 'delivered', 'failed', 'dead'))
      );

create index outbox_deliveries_due_idx on public.outbox_deliveries (tenant_id, next_attempt_at) where status in ('pending', 'failed');

create index outbox_deliveries_lease_idx on public.outbox_deliveries (tenant_id, lease_expires_at) where status = 'processing';

create index outbox_deliveries_ordering_idx on public.outbox_deliveries (tenant_id, consumer_name, aggregate_key, event_seq)
         where aggregate_key is not null and status <> 'delivered';

create index event_outbox_pending_aggregate_idx on public.event_outbox (tenant_id, aggregate_type, aggregate_id, seq)
         where status = 'pending' and aggregate_id is not null;

create index outbox_deliveries_dead_idx on public.outbox_deliveries (tenant_id, consumer_name) where status = 'dead';

create table public.consumer_inbox (
        event_id uuid not null,
        consumer_name text not null,
        tenant_id uuid not null,
        processed_at timestamptz not null default now(),
        constraint consumer_inbox_pkey primary key (event_id, consumer_name)
      );

create function public.outbox_due_tenants(max_tenants integer, after_tenant uuid default null)
      returns table (tenant_id uuid, has_new boolean, has_due boolean)
      language sql stable security definer set search_path = pg_catalog, public as $$
        with recursive pending_t(tenant_id) as (
          (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
            from pending_t p where p.tenant_id is not null
        ), retry_t(tenant_id) as (
          (select tenant_id from public.outbox_deliveries
            where status in ('pending', 'failed') and next_attempt_at <= now() order by tenant_id limit 1)
          union all
          select (select d.tenant_id from public.outbox_deliveries d
                   where d.status in ('pending', 'failed') and d.next_attempt_at <= now() and d.tenant_id > r.tenant_id
                   order by d.tenant_id limit 1)
            from retry_t r where r.tenant_id is not null
        ), stale_t(tenant_id) as (
          (select tenant_id from public.outbox_deliveries
            where status = 'processing' and lease_expires_at <= now() order by tenant_id limit 1)
          union all
          select (select d.tenant_id from public.outbox_deliveries d
                   where d.status = 'processing' and d.lease_expires_at <= now() and d.tenant_id > s.tenant_id
                   order by d.tenant_id limit 1)
            from stale_t s where s.tenant_id is not null
        )
        select t.tenant_id, bool_or(t.is_new), bool_or(not t.is_new) from (
          select p.tenant_id, true as is_new from pending_t p
          union all select r.tenant_id, false from retry_t r
          union all select s.tenant_id, false from stale_t s
        ) t where t.tenant_id is not null
        group by t.tenant_id
        order by t.tenant_id <= after_tenant, t.tenant_id
        limit max_tenants
      $$;
