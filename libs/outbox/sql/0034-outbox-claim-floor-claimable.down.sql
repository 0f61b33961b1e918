-- nestjs-pg-outbox migration 0034-outbox-claim-floor-claimable (down), recorded from the TypeORM class OutboxClaimFloorClaimable1764503100000. Do not edit.
create or replace function public.outbox_claim_floor(margin interval) returns uuid
      language plpgsql stable security definer set search_path = pg_catalog, public set timezone = 'UTC' as $$
      declare
        recent uuid := public.outbox_uuid_at(now() - margin);
        probes text;
        found uuid;
      begin
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then return null; end if;
        -- the ranges older than the margin, oldest first, from their partitions' names (<table>_p<yyyymmdd>t<hhmi>,
        -- UTC: outbox_create_range, hence the function's time zone: to_timestamp reads the name in the session's, where
        -- a range's start may not exist, e.g. 02:00 of a spring-forward day, read as 03:00): the catalog only, no
        -- bound expression parsed. One statement, a probe of a
        -- partial index per status (event_outbox_pending_idx, _processing_idx, _scheduled_idx;
        -- outbox_deliveries_due_idx, _lease_idx), which stops at the first busy range.
        select string_agg(format('select %L::uuid where exists (select 1 from %I.%I where status = ''pending'')
                                  or exists (select 1 from %2$I.%3$I where status = ''processing'')
                                  or exists (select 1 from %2$I.%3$I where status = ''scheduled'')
                                  or exists (select 1 from %2$I.%4$I where status in (''pending'', ''failed''))
                                  or exists (select 1 from %2$I.%4$I where status = ''processing'')',
                                 r.lo, r.schema, 'event_outbox' || r.suffix, 'outbox_deliveries' || r.suffix),
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
        -- floor too, so work left there older than the margin means no floor (one probe of a partial index each)
        if exists (select 1 from public.event_outbox_default where status = 'pending' and id < recent)
           or exists (select 1 from public.event_outbox_default where status = 'processing' and id < recent)
           or exists (select 1 from public.event_outbox_default where status = 'scheduled' and id < recent)
           or exists (select 1 from public.outbox_deliveries_default
                       where status in ('pending', 'failed') and event_id < recent)
           or exists (select 1 from public.outbox_deliveries_default where status = 'processing' and event_id < recent) then
          return '00000000-0000-0000-0000-000000000000'::uuid;
        end if;
        if probes is not null then
          execute 'select * from (' || probes || ') busy limit 1' into found;
        end if;
        return coalesce(found, recent);
      end $$;
