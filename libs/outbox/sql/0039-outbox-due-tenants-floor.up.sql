-- nestjs-pg-outbox migration 0039-outbox-due-tenants-floor (up), recorded from the TypeORM class OutboxDueTenantsFloor1764504100000. Do not edit.
create function public.outbox_due_tenants(max_tenants integer, after_tenant uuid, past_tenants uuid[],
                                                past_seqs bigint[], positions_server text,
                                                leases_since timestamptz, event_floor uuid)
      returns table (tenant_id uuid, has_new boolean, has_due boolean)
      language plpgsql stable security definer set search_path = pg_catalog, public
      set plan_cache_mode = force_generic_plan as $$
      #variable_conflict use_column
      begin
        -- the server's start in microseconds, as the claims read it: the same text whatever the session's TimeZone
        -- and DateStyle (pg_postmaster_start_time()::text is written in them)
        if positions_server is distinct from (extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint::text then
          past_tenants := '{}';
          past_seqs := '{}';
        end if;
        return query
        with recursive fence(tenant_id, seq, prev) as (
          -- the tenants with a position, in uuid order, and the two ends of that order (from 0 unless positioned)
          select k.t, k.s, lag(k.t) over (order by k.t) from (
            select a.t, max(a.s) as s from (
              select u.t, u.s from unnest(past_tenants, past_seqs) as u(t, s)
              union all select '00000000-0000-0000-0000-000000000000'::uuid, 0
              union all select 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid, 0
            ) a group by a.t) k
        ), pending_gap(found, hi) as (
          -- the tenants between two fences, one probe each: a range that holds no fence's entries; every probe of
          -- the events and deliveries from the floor (a parameter: the executor prunes the ranges below it at its start)
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > f.prev and e.tenant_id < f.tenant_id
                     and e.id >= event_floor
                   order by e.tenant_id limit 1), f.tenant_id
            from fence f where f.prev is not null
          union all
          select (select e.tenant_id from public.event_outbox e
                   where e.status = 'pending' and e.tenant_id > g.found and e.tenant_id < g.hi
                     and e.id >= event_floor
                   order by e.tenant_id limit 1), g.hi
            from pending_gap g where g.found is not null
        ), leased_gap(found, hi) as (
          select (select l.tenant_id from public.outbox_event_leases l
                   where l.lease_expires_at <= now() and l.tenant_id > f.prev and l.tenant_id < f.tenant_id
                   order by l.tenant_id limit 1), f.tenant_id
            from fence f where f.prev is not null
          union all
          select (select l.tenant_id from public.outbox_event_leases l
                   where l.lease_expires_at <= now() and l.tenant_id > g.found and l.tenant_id < g.hi
                   order by l.tenant_id limit 1), g.hi
            from leased_gap g where g.found is not null
        ), pending_t(tenant_id) as (
          select g.found from pending_gap g
          union all
          select f.tenant_id from fence f
           -- a probe per fence from its position, in the pending index's order (a subquery, which EXISTS does not
           -- strip of its order): the plan is generic, the position unknown to it, and an EXISTS alone looked
           -- cheapest as a sequential scan that stops at its first match, which read every settled row of the
           -- table ahead of a backlogged tenant's first pending event, at every scan
           where exists (select 1 from (select 1 from public.event_outbox e
                                         where e.tenant_id = f.tenant_id and e.status = 'pending' and e.seq >= f.seq
                                           and e.id >= event_floor
                                         order by e.seq limit 1) e)
        ), leased_t(tenant_id) as (
          -- event leases that expired, the same way: between the fences, from each tenant's start; of a positioned
          -- tenant, those that expired since the relay's last complete scan (leases_since, a second early), not
          -- every lease deleted since a held snapshot began (their entries stay in the expiry index); the lower
          -- end is a bound of the index range (an "or" in the condition would make it a filter after each heap fetch)
          select g.found from leased_gap g
          union all
          select f.tenant_id from fence f
           where exists (select 1 from (select 1 from public.outbox_event_leases l
                          where l.tenant_id = f.tenant_id and l.lease_expires_at <= now()
                            and l.lease_expires_at > case when f.seq = 0 or leases_since is null
                                                          then '-infinity'::timestamptz
                                                          else leases_since - interval '1 second' end
                          -- a subquery in the expiry index's order keeps the probe a subplan run per fence, both
                          -- ends bounds of its index range: pulled up into a semi join once the lease table's
                          -- statistics said it was empty (the relay's VACUUM of it, an ANALYZE), it read every
                          -- expired entry of the index and filtered the tenant and the lower end after each: every
                          -- lease deleted since a held snapshot began (ADR 1206, addendum on the 10-minute hold)
                          order by l.lease_expires_at limit 1) l)
        ), retry_t(tenant_id) as (
          (select d.tenant_id from public.outbox_deliveries d
            where d.status in ('pending', 'failed') and d.next_attempt_at <= now() and d.event_id >= event_floor
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                      and (x.resumes_at is null or x.resumes_at > now()))
            order by d.tenant_id limit 1)
          union all
          select (select d.tenant_id from public.outbox_deliveries d
                   where d.status in ('pending', 'failed') and d.next_attempt_at <= now() and d.tenant_id > r.tenant_id
                   and d.event_id >= event_floor
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                      and (x.resumes_at is null or x.resumes_at > now()))
                   order by d.tenant_id limit 1)
            from retry_t r where r.tenant_id is not null
        ), stale_t(tenant_id) as (
          (select d.tenant_id from public.outbox_deliveries d
            where d.status = 'processing' and d.lease_expires_at <= now() and d.event_id >= event_floor
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                      and (x.resumes_at is null or x.resumes_at > now()))
            order by d.tenant_id limit 1)
          union all
          select (select d.tenant_id from public.outbox_deliveries d
                   where d.status = 'processing' and d.lease_expires_at <= now() and d.tenant_id > s.tenant_id
                   and d.event_id >= event_floor
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                      and (x.resumes_at is null or x.resumes_at > now()))
                   order by d.tenant_id limit 1)
            from stale_t s where s.tenant_id is not null
        )
        select t.tenant_id, bool_or(t.is_new), bool_or(not t.is_new) from (
          select p.tenant_id, true as is_new from pending_t p
          union all select l.tenant_id, true from leased_t l
          union all select r.tenant_id, false from retry_t r
          union all select s.tenant_id, false from stale_t s
        ) t where t.tenant_id is not null
        group by t.tenant_id
        order by t.tenant_id <= after_tenant, t.tenant_id
        limit max_tenants;
      end
      $$;

revoke all on function public.outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz, uuid) from public;

grant execute on function public.outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz, uuid) to outbox_relay;
