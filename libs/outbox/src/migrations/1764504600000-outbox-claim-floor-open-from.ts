import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A reading of the claims' floor that starts where the open work starts (docs/adr/1207-partitioned-history.md,
 * addendum "A floor reading from the open floor"). `outbox_claim_floor(margin)` probes every range older than the
 * margin at each reading, settled or not: 703 buffers at 100 hourly ranges, every 5 s per relay.
 *
 * The three-argument form also returns the open floor: the start of the oldest range older than the margin that
 * holds open work — work claimable now or later (pending, scheduled, retried, paused) or in flight — else the
 * margin's id, and never above the lowest leased event. The caller passes it back with the `xmin` of that reading's
 * snapshot, and the next reading probes only the ranges from there (looked up by name in `pg_class`, from the range
 * holding it), one at a time, each range's bounds a variable, so that each probe is pruned when its executor starts.
 * Ranges below the open floor hold only settled or dead work. What brings work back there — a replay (a dead
 * delivery), a backfill (new deliveries of old events) — writes one row of `outbox_reopened` in its statement: the
 * lowest event id it reopened, with its transaction id. The reading starts from the lowest of those written by
 * transactions its previous reading did not see (`xact` at or above that reading's `xmin`), so that it finds them at
 * the next reading, as the one-argument form does. A null open floor (or null `xmin`) reads every range. The writers
 * delete rows older than a day as they go.
 *
 * The one-argument form stays, unchanged (relays of the previous release, during a rolling upgrade).
 * Frozen history: literal SQL.
 */
export class OutboxClaimFloorOpenFrom1764504600000 implements MigrationInterface {
  name = 'OutboxClaimFloorOpenFrom1764504600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.outbox_reopened (
        xact xid8 not null default pg_current_xact_id(),
        event_id uuid not null,
        at timestamptz not null default clock_timestamp()
      )`);
    await q.query(`create index outbox_reopened_xact_idx on public.outbox_reopened (xact)`);
    await q.query(`create index outbox_reopened_at_idx on public.outbox_reopened (at)`);
    await q.query(`grant select, insert, update, delete on public.outbox_reopened to outbox_relay`);
    await q.query(`
      create function public.outbox_claim_floor(margin interval, open_from uuid, reopened_since xid8)
      returns table (floor uuid, open_floor uuid)
      language plpgsql stable security definer set search_path = pg_catalog, public set timezone = 'UTC'
      set plan_cache_mode = force_generic_plan set enable_seqscan = off set enable_sort = off
      set jit = off as $$
      declare
        recent uuid := public.outbox_uuid_at(now() - margin);
        soon timestamptz := now() + interval '1 minute';
        leased uuid;
        reopened uuid;
        start_id uuid := '00000000-0000-0000-0000-000000000000'::uuid;
        ns oid;
        first_name name;
        r record;
        opened uuid;
        found uuid;
      begin
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then
          return query select null::uuid, null::uuid;
          return;
        end if;
        select l.event_id into leased from public.outbox_event_leases l order by l.event_id limit 1;
        -- where this reading starts: the open floor passed, lowered by what was reopened since that reading
        if open_from is not null and reopened_since is not null then
          -- (no min() of uuid before PostgreSQL 16: their text sorts as they do)
          select min(x.event_id::text)::uuid into reopened from public.outbox_reopened x where x.xact >= reopened_since;
          start_id := case when reopened < open_from then reopened else open_from end;
        end if;
        -- the default partitions, as the one-argument form (sql/0035): claimable work there older than the margin
        -- means no floor; the open floor does not move
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
          return query select '00000000-0000-0000-0000-000000000000'::uuid, start_id;
          return;
        end if;
        -- the range holding start_id: the last partition of event_outbox named (<table>_p<yyyymmdd>t<hhmi>, UTC) at
        -- or before its time, found on pg_class's name index, as are the ranges after it: no walk of every range
        ns := (select c.relnamespace from pg_class c where c.oid = 'public.event_outbox'::regclass);
        select c.relname into first_name
          from pg_class c
         where c.relnamespace = ns and c.relname >= 'event_outbox_p'
           and c.relname <= ('event_outbox_p' || to_char(public.outbox_uuid_time(start_id), 'YYYYMMDD"t"HH24MI'))::name
           and c.relname ~ '^event_outbox_p[0-9]{8}t[0-9]{4}$' and c.relkind = 'r'
         order by c.relname desc limit 1;
        -- oldest first, those older than the margin; bounds from the catalog as in sql/0035. Per range, while no open
        -- work was found below it: a probe of each partial index for any open work (pending, scheduled, pending or
        -- failed whenever due and paused or not, processing); then, as the one-argument form, whether it holds work
        -- claimable now or within a minute, which ends the walk. The bounds are variables: each probe is pruned to
        -- that range's partitions when its executor starts.
        for r in select x.lo, x.bound_lo, x.bound_hi
                   from (select public.outbox_uuid_at(to_timestamp(substr(c.relname, 15), 'YYYYMMDD"t"HH24MI')::timestamp
                                                      at time zone 'UTC') as lo,
                                substring(b.bound from 'FROM \\(''([0-9a-f-]+)''\\)')::uuid as bound_lo,
                                substring(b.bound from 'TO \\(''([0-9a-f-]+)''\\)')::uuid as bound_hi,
                                c.relname
                           from pg_class c,
                                lateral (select pg_get_expr(c.relpartbound, 0) as bound offset 0) b
                          where c.relnamespace = ns and c.relname >= coalesce(first_name, 'event_outbox_p')
                            and c.relname < 'event_outbox_p:'
                            and c.relname ~ '^event_outbox_p[0-9]{8}t[0-9]{4}$' and c.relkind = 'r'
                            and exists (select 1 from pg_inherits i
                                         where i.inhrelid = c.oid and i.inhparent = 'public.event_outbox'::regclass)) x
                  where x.lo < recent
                  order by x.relname loop
          if opened is null then
            if not (exists (select 1 from (select 1 from public.event_outbox e
                                            where e.status = 'pending' and e.id >= r.bound_lo and e.id < r.bound_hi
                                            order by e.tenant_id, e.seq limit 1) e)
                    or exists (select 1 from (select 1 from public.event_outbox e
                                               where e.status = 'scheduled' and e.id >= r.bound_lo and e.id < r.bound_hi
                                               order by e.deliver_at limit 1) e)
                    or exists (select 1 from (select 1 from public.outbox_deliveries d
                                               where d.status in ('pending', 'failed')
                                                 and d.event_id >= r.bound_lo and d.event_id < r.bound_hi
                                               order by d.tenant_id, d.next_attempt_at limit 1) d)
                    or exists (select 1 from (select 1 from public.outbox_deliveries d
                                               where d.status = 'processing'
                                                 and d.event_id >= r.bound_lo and d.event_id < r.bound_hi
                                               order by d.tenant_id, d.lease_expires_at limit 1) d)) then
              continue;
            end if;
            opened := r.lo;
          end if;
          if exists (select 1 from (select 1 from public.event_outbox e
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
                                        order by d.tenant_id, d.lease_expires_at limit 1) d) then
            found := r.lo;
            exit;
          end if;
        end loop;
        found := coalesce(found, recent);
        opened := coalesce(opened, recent);
        return query select case when leased < found then leased else found end,
                            case when leased < opened then leased else opened end;
      end $$`);
    await q.query(`revoke all on function public.outbox_claim_floor(interval, uuid, xid8) from public`);
    await q.query(`grant execute on function public.outbox_claim_floor(interval, uuid, xid8) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_claim_floor(interval, uuid, xid8)`);
    await q.query(`drop table if exists public.outbox_reopened`);
  }
}
