-- nestjs-pg-outbox migration 0024-outbox-overdue-scheduled (up), recorded from the TypeORM class OutboxOverdueScheduled1764501800000. Do not edit.
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
        select coalesce(extract(epoch from now() - least((select at from oldest_event), (select at from oldest_delivery),
          (select s.deliver_at from public.event_outbox s
            where s.status = 'scheduled' and s.deliver_at <= now() order by s.deliver_at limit 1)))::double precision, 0)
      $$;
