-- nestjs-pg-outbox migration 0012-outbox-board (up), recorded from the TypeORM class OutboxBoard1764500100000. Do not edit.
create table public.outbox_audit (
        id bigint generated always as identity primary key,
        tenant_id uuid not null,
        actor text not null,
        action text not null,
        target jsonb not null default '{}'::jsonb,
        rows_affected integer not null,
        created_at timestamptz not null default now()
      );

create index outbox_audit_tenant_idx on public.outbox_audit (tenant_id, id);

alter table public.outbox_audit enable row level security;

create policy outbox_audit_tenant_isolation on public.outbox_audit
        to outbox_app, outbox_relay
        using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)
        with check (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid);

grant select, insert on public.outbox_audit to outbox_relay;

create table public.outbox_activity (
        tenant_id uuid not null,
        minute timestamptz not null,
        consumer_name text not null,
        delivered integer not null default 0,
        failed integer not null default 0,
        dead integer not null default 0,
        deferred integer not null default 0,
        constraint outbox_activity_pkey primary key (tenant_id, minute, consumer_name)
      );

create index outbox_activity_minute_idx on public.outbox_activity (minute);

alter table public.outbox_activity enable row level security;

create policy outbox_activity_tenant_isolation on public.outbox_activity
        to outbox_app, outbox_relay
        using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid);

grant select on public.outbox_activity to outbox_relay;

create function public.outbox_record_activity(
        tenants uuid[], minutes timestamptz[], consumers text[],
        delivered integer[], failed integer[], dead integer[], deferred integer[]
      ) returns void
      language sql volatile security definer set search_path = pg_catalog, public as $$
        insert into public.outbox_activity as a (tenant_id, minute, consumer_name, delivered, failed, dead, deferred)
        select * from unnest(tenants, minutes, consumers, delivered, failed, dead, deferred)
        on conflict (tenant_id, minute, consumer_name) do update
          set delivered = a.delivered + excluded.delivered, failed = a.failed + excluded.failed,
              dead = a.dead + excluded.dead, deferred = a.deferred + excluded.deferred;
        delete from public.outbox_activity where minute < now() - interval '2 hours';
      $$;

revoke all on function public.outbox_record_activity(uuid[], timestamptz[], text[], integer[], integer[], integer[], integer[]) from public;

grant execute on function public.outbox_record_activity(uuid[], timestamptz[], text[], integer[], integer[], integer[], integer[]) to outbox_relay;

create index outbox_deliveries_open_idx on public.outbox_deliveries (tenant_id, consumer_name, status, id)
         where status <> 'delivered';

create index event_outbox_processing_idx on public.event_outbox (tenant_id) where status = 'processing';

create function public.outbox_row_estimate(tenant uuid, status text, consumer text default null)
      returns bigint
      language plpgsql volatile set search_path = pg_catalog, public as $$
      declare
        plan json;
      begin
        if consumer is null then
          execute format('explain (format json) select 1 from public.event_outbox where tenant_id = %L and status = %L',
                         tenant, status) into plan;
        else
          execute format('explain (format json) select 1 from public.outbox_deliveries where tenant_id = %L and consumer_name = %L and status = %L',
                         tenant, consumer, status) into plan;
        end if;
        return (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
      end
      $$;

grant execute on function public.outbox_row_estimate(uuid, text, text) to outbox_relay;
