-- nestjs-pg-outbox migration 0035-outbox-readings-on-generic-plans (down), recorded from the TypeORM class OutboxReadingsOnGenericPlans1764503600000. Do not edit.
alter function public.outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz)
        reset plan_cache_mode;

create or replace function public.outbox_claim_floor(margin interval) returns uuid
      language plpgsql stable security definer set search_path = pg_catalog, public set timezone = 'UTC' as $$
      declare
        recent uuid := public.outbox_uuid_at(now() - margin);
        -- work that becomes claimable within a minute counts now: readings come every few seconds, so the floor is
        -- down before it is due
        soon timestamptz := now() + interval '1 minute';
        -- a range's pending and failed deliveries, the first 100 in the due index's order, of which one is due soon
        -- and of a pair not paused: a bounded probe (a paused consumer's backlog is not walked at every reading)
        due text := 'exists (select 1 from (select d.tenant_id, d.consumer_name, d.next_attempt_at from %s d
                       where d.status in (''pending'', ''failed'')%s order by d.tenant_id, d.next_attempt_at limit 100) d
                      where d.next_attempt_at <= %L::timestamptz
                        and not exists (select 1 from public.outbox_consumer_pauses x
                                         where x.consumer_name = d.consumer_name
                                           and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                           and (x.resumes_at is null or x.resumes_at > %3$L::timestamptz)))';
        -- events in flight are claimed again through their lease (outbox_event_leases), once it expires: the
        -- lowest leased id, from its key (a processing event without a lease waits for its deliveries, probed below)
        leased uuid;
        probes text;
        found uuid;
        busy boolean;
      begin
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then return null; end if;
        select l.event_id into leased from public.outbox_event_leases l order by l.event_id limit 1;
        -- the ranges older than the margin, oldest first, from their partitions' names (<table>_p<yyyymmdd>t<hhmi>,
        -- UTC: outbox_create_range; hence the function's time zone). One statement, which stops at the first range
        -- holding work claimable now or within a minute: an event pending, an event scheduled for then, a delivery
        -- pending or failed and due then (not paused), a delivery processing. Work that is not
        -- claimable (paused, scheduled or retried later) does not hold the floor down: the reading after it becomes
        -- claimable counts it; what the bounded probe misses, the tenant's claims without a floor find.
        select string_agg(format('select %L::uuid where exists (select 1 from %I.%I where status = ''pending'')
                                  or exists (select 1 from %2$I.%3$I where status = ''scheduled'' and deliver_at <= %5$L::timestamptz)
                                  or %6$s
                                  or exists (select 1 from %2$I.%4$I where status = ''processing'')',
                                 r.lo, r.schema, 'event_outbox' || r.suffix, 'outbox_deliveries' || r.suffix, soon,
                                 format(due, format('%I.%I', r.schema, 'outbox_deliveries' || r.suffix), '', soon)),
                          ' union all ' order by r.lo)
          into probes
          from (select c.relnamespace::regnamespace::text as schema, s.suffix,
                       public.outbox_uuid_at(to_timestamp(substr(s.suffix, 3), 'YYYYMMDD"t"HH24MI')::timestamp
                                             at time zone 'UTC') as lo
                  from pg_inherits i join pg_class c on c.oid = i.inhrelid,
                       lateral (select substring(c.relname from '_p[0-9]{8}t[0-9]{4}$') as suffix) s
                 where i.inhparent = 'public.event_outbox'::regclass and s.suffix is not null) r
         where r.lo < recent;
        -- the default partitions (the tables before the conversion, ids of no range): the claims read them with the
        -- floor too, so claimable work left there older than the margin means no floor
        execute format('select exists (select 1 from public.event_outbox_default where status = ''pending'' and id < $1)
                          or exists (select 1 from public.event_outbox_default
                                      where status = ''scheduled'' and deliver_at <= $2 and id < $1)
                          or %s
                          or exists (select 1 from public.outbox_deliveries_default
                                      where status = ''processing'' and event_id < $1)',
                       format(due, 'public.outbox_deliveries_default', ' and d.event_id < $1', soon))
          into busy using recent, soon;
        if busy then
          return '00000000-0000-0000-0000-000000000000'::uuid;
        end if;
        if probes is not null then
          execute 'select * from (' || probes || ') busy limit 1' into found;
        end if;
        found := coalesce(found, recent);
        return case when leased < found then leased else found end;
      end $$;
