-- nestjs-pg-outbox migration 0022-outbox-scheduled-events (up), recorded from the TypeORM class OutboxScheduledEvents1764501600000. Do not edit.
alter table public.event_outbox add column deliver_at timestamptz;

alter table public.event_outbox drop constraint event_outbox_status_check,
        add constraint event_outbox_status_check
          check (status in ('pending', 'processing', 'published', 'failed', 'no_handlers', 'scheduled')) not valid;

alter table public.event_outbox validate constraint event_outbox_status_check;

create index event_outbox_scheduled_idx on public.event_outbox (deliver_at) where status = 'scheduled';

create function public.outbox_promote_scheduled(max_events integer)
      returns table (tenant_ids uuid[], promoted integer, next_due_in_ms double precision)
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        due record;
        tenants uuid[] := '{}';
        moved integer := 0;
      begin
        for due in
          select e.id, e.tenant_id from public.event_outbox e
           where e.status = 'scheduled' and e.deliver_at <= now()
           order by e.deliver_at, e.seq
           limit max_events
             for update skip locked
        loop
          update public.event_outbox set status = 'pending', seq = default, updated_at = now() where id = due.id;
          moved := moved + 1;
          if not due.tenant_id = any(tenants) then
            tenants := tenants || due.tenant_id;
          end if;
        end loop;
        return query
          select tenants, moved,
                 (select extract(epoch from (s.deliver_at - clock_timestamp())) * 1000
                    from public.event_outbox s where s.status = 'scheduled'
                   order by s.deliver_at limit 1)::float8;
      end
      $$;

revoke all on function public.outbox_promote_scheduled(integer) from public;

grant execute on function public.outbox_promote_scheduled(integer) to outbox_relay;

create or replace function public.outbox_oldest_pending_age(orphaned_after interval) returns double precision
      language sql stable security definer set search_path = pg_catalog, public as $$
        with recursive pending_t(tenant_id) as (
          (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
            from pending_t p where p.tenant_id is not null
        ), oldest_event as (
          select min((select greatest(e.created_at, e.deliver_at) from public.event_outbox e
                       where e.status = 'pending' and e.tenant_id = p.tenant_id order by e.seq limit 1)) as at
            from pending_t p where p.tenant_id is not null
        ), oldest_delivery as (
          select min(d.created_at) as at from public.outbox_deliveries d
           where d.status in ('pending', 'failed')
             and not exists (select 1 from public.outbox_consumers c
                              where c.name = d.consumer_name and c.last_seen_at <= now() - orphaned_after)
        )
        select coalesce(extract(epoch from now() - least((select at from oldest_event), (select at from oldest_delivery)))::double precision, 0)
      $$;
