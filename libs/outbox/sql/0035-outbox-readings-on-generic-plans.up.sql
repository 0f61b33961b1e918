-- nestjs-pg-outbox migration 0035-outbox-readings-on-generic-plans (up), recorded from the TypeORM class OutboxReadingsOnGenericPlans1764503600000. Do not edit.
alter function public.outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz)
        set plan_cache_mode = force_generic_plan;

create or replace function public.outbox_claim_floor(margin interval) returns uuid
      language plpgsql stable security definer set search_path = pg_catalog, public set timezone = 'UTC'
      set plan_cache_mode = force_generic_plan set enable_seqscan = off set enable_sort = off
      set jit = off as $$
      declare
        recent uuid := public.outbox_uuid_at(now() - margin);
        -- work that becomes claimable within a minute counts now: readings come every few seconds, so the floor is
        -- down before it is due
        soon timestamptz := now() + interval '1 minute';
        -- events in flight are claimed again through their lease (outbox_event_leases), once it expires: the
        -- lowest leased id, from its key (a processing event without a lease waits for its deliveries, probed below)
        leased uuid;
        starts uuid[];
        los uuid[];
        his uuid[];
        found uuid;
      begin
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then return null; end if;
        select l.event_id into leased from public.outbox_event_leases l order by l.event_id limit 1;
        -- the default partitions (the tables before the conversion, ids of no range): the claims read them with the
        -- floor too, so claimable work left there older than the margin means no floor. The due probe, here and in
        -- the ranges: the first 100 pending and failed deliveries in the due index's order, of which one is due
        -- soon and of a pair not paused (a paused consumer's backlog is not walked at every reading). Each probe
        -- reads its partial index in that index's order (a subquery, which EXISTS does not strip of its order):
        -- the plans are generic, made once per session with the statistics of then, and a condition on the id
        -- alone could make a key's range scan look cheaper, which would walk a settled range row by row; sorts and
        -- sequential scans are off in the function (their disabling cost would make PostgreSQL compile the
        -- statement at every reading: jit is off too)
        if exists (select 1 from (select 1 from public.event_outbox_default e
                                   where e.status = 'pending' and e.id < recent
                                   order by e.tenant_id, e.seq limit 1) e)
           or exists (select 1 from (select 1 from public.event_outbox_default e
                                      where e.status = 'scheduled' and e.deliver_at <= soon and e.id < recent
                                      order by e.deliver_at limit 1) e)
           or exists (select 1 from (select d.tenant_id, d.consumer_name, d.next_attempt_at
                                       from public.outbox_deliveries_default d
                                      where d.status in ('pending', 'failed') and d.event_id < recent
                                      order by d.tenant_id, d.next_attempt_at limit 100) d
                       where d.next_attempt_at <= soon
                         and not exists (select 1 from public.outbox_consumer_pauses x
                                          where x.consumer_name = d.consumer_name
                                            and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                            and (x.resumes_at is null or x.resumes_at > soon)))
           or exists (select 1 from (select 1 from public.outbox_deliveries_default d
                                      where d.status = 'processing' and d.event_id < recent
                                      order by d.tenant_id, d.lease_expires_at limit 1) d) then
          return '00000000-0000-0000-0000-000000000000'::uuid;
        end if;
        -- the ranges older than the margin, oldest first: their starts from their partitions' names
        -- (<table>_p<yyyymmdd>t<hhmi>, UTC: outbox_create_range; hence the function's time zone), their bounds from
        -- the catalog, those of event_outbox's partition (the three tables' partitions of a range share them)
        select array_agg(r.lo order by r.lo), array_agg(r.bound_lo order by r.lo), array_agg(r.bound_hi order by r.lo)
          into starts, los, his
          from (select public.outbox_uuid_at(to_timestamp(substr(s.suffix, 3), 'YYYYMMDD"t"HH24MI')::timestamp
                                             at time zone 'UTC') as lo,
                       substring(b.bound from 'FROM \(''([0-9a-f-]+)''\)')::uuid as bound_lo,
                       substring(b.bound from 'TO \(''([0-9a-f-]+)''\)')::uuid as bound_hi
                  from pg_inherits i join pg_class c on c.oid = i.inhrelid,
                       lateral (select substring(c.relname from '_p[0-9]{8}t[0-9]{4}$') as suffix) s,
                       -- relid 0: a bound holds constants only, and PostgreSQL opens the relation for any other
                       lateral (select pg_get_expr(c.relpartbound, 0) as bound offset 0) b
                 where i.inhparent = 'public.event_outbox'::regclass and s.suffix is not null) r
         where r.lo < recent;
        -- one statement, which stops at the first range (the arrays' order) holding work claimable now or within a
        -- minute: an event pending, an event scheduled for then, a delivery pending or failed and due then (not
        -- paused), a delivery processing. Each probe reads the parent between the range's bounds, a parameter of
        -- the probe: the executor runs that range's partition only (the default partition holds no id of a range),
        -- and the plan, generic, is made once per session, not at each reading. Work that is not claimable
        -- (paused, scheduled or retried later) does not hold the floor down: the reading after it becomes claimable
        -- counts it; what the bounded probe misses, the tenant's claims without a floor find.
        select r.lo into found
          from unnest(starts, los, his) as r(lo, bound_lo, bound_hi)
         where exists (select 1 from (select 1 from public.event_outbox e
                                       where e.status = 'pending' and e.id >= r.bound_lo and e.id < r.bound_hi
                                       order by e.tenant_id, e.seq limit 1) e)
            or exists (select 1 from (select 1 from public.event_outbox e
                                       where e.status = 'scheduled' and e.deliver_at <= soon
                                         and e.id >= r.bound_lo and e.id < r.bound_hi
                                       order by e.deliver_at limit 1) e)
            or exists (select 1 from (select d.tenant_id, d.consumer_name, d.next_attempt_at
                                        from public.outbox_deliveries d
                                       where d.status in ('pending', 'failed')
                                         and d.event_id >= r.bound_lo and d.event_id < r.bound_hi
                                       order by d.tenant_id, d.next_attempt_at limit 100) d
                        where d.next_attempt_at <= soon
                          and not exists (select 1 from public.outbox_consumer_pauses x
                                           where x.consumer_name = d.consumer_name
                                             and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                             and (x.resumes_at is null or x.resumes_at > soon)))
            or exists (select 1 from (select 1 from public.outbox_deliveries d
                                       where d.status = 'processing'
                                         and d.event_id >= r.bound_lo and d.event_id < r.bound_hi
                                       order by d.tenant_id, d.lease_expires_at limit 1) d)
         limit 1;
        found := coalesce(found, recent);
        return case when leased < found then leased else found end;
      end $$;
