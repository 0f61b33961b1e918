-- nestjs-pg-outbox migration 0022-outbox-scheduled-events (down), recorded from the TypeORM class OutboxScheduledEvents1764501600000. Do not edit.
create or replace function public.outbox_oldest_pending_age(orphaned_after interval) returns double precision
      language sql stable security definer set search_path = pg_catalog, public as $$
        with recursive pending_t(tenant_id) as (
          (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
            from pending_t p where p.tenant_id is not null
        ), oldest_event as (
          select min((select e.created_at from public.event_outbox e
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

drop function if exists public.outbox_promote_scheduled(integer);

update public.event_outbox set status = 'pending', seq = default where status = 'scheduled';

drop index if exists public.event_outbox_scheduled_idx;

alter table public.event_outbox drop constraint event_outbox_status_check,
        add constraint event_outbox_status_check
          check (status in ('pending', 'processing', 'published', 'failed', 'no_handlers'));

alter table public.event_outbox drop column if exists deliver_at;
