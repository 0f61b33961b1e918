-- nestjs-pg-outbox migration 0020-outbox-scheduled-events (up), recorded from the TypeORM class OutboxScheduledEvents1764501100000. Do not edit.
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
