-- nestjs-pg-outbox migration 0021-outbox-event-search (down), recorded from the TypeORM class OutboxEventSearch1764501500000. Do not edit.
create or replace function public.outbox_record_activity(
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

drop index if exists public.event_outbox_correlation_idx;

drop index if exists public.event_outbox_aggregate_idx;

drop index if exists public.event_outbox_name_idx;
