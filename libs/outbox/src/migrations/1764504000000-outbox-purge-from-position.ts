import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A second form of `outbox_purge_settled`, with positions: each table (today's layout; in the partitioned layout
 * each range not dropped, and the default partitions) is read from the `published_at` its last batch ended at,
 * not from its oldest settled event. While a snapshot is held, the settled index keeps an entry for every event
 * deleted since it began, and each batch read them all again from the oldest: 34,803 to 101,505 buffers per batch
 * over a 10-minute hold (docs/adr/1206-claims-that-start-past-the-settled.md, addendum "Retention's purge").
 *
 * `after_ranges` and `after_ats` pair a range (its lower bound; null for the table itself or the default
 * partitions, which are the same table before and after the conversion) with where its next batch starts
 * (`published_at >=`, so events settled in the same transaction as the last one deleted are not skipped). It
 * returns the events deleted and the positions moved to (ranges dropped since are left out). An event settled
 * below a position after the position passed it (its transaction committed late, or its row was locked) is
 * deleted by the next batch that starts without positions: the relay starts so at least once an hour.
 *
 * The two-argument form stays for relays of older releases (rolling deploys). Frozen history: literal SQL.
 */
export class OutboxPurgeFromPosition1764504000000 implements MigrationInterface {
  name = 'OutboxPurgeFromPosition1764504000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create function public.outbox_purge_settled(older_than timestamptz, max_events integer,
                                                  after_ranges uuid[], after_ats timestamptz[],
                                                  out deleted integer, out ranges uuid[], out ats timestamptz[])
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        n integer;
        last_at timestamptz;
        k integer;
        due boolean;
        r record;
      begin
        if older_than is null or older_than > now() - interval '1 hour' then
          raise exception 'outbox_purge_settled: cut-off % is less than an hour ago; events settled within the last hour are never purged', older_than
            using errcode = '22023';
        end if;
        if max_events is null or max_events < 1 then
          raise exception 'outbox_purge_settled: max_events must be at least 1, got %', max_events using errcode = '22023';
        end if;
        if coalesce(cardinality(after_ranges), 0) <> coalesce(cardinality(after_ats), 0) then
          raise exception 'outbox_purge_settled: after_ranges and after_ats must be as long as each other' using errcode = '22023';
        end if;
        deleted := 0;
        ranges := coalesce(after_ranges, '{}');
        ats := coalesce(after_ats, '{}');
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then
          k := array_position(ranges, null::uuid);
          with doomed as (
            select id, tenant_id from public.event_outbox
             where status in ('published', 'no_handlers')
               and published_at >= coalesce(ats[k], '-infinity') and published_at < older_than
             order by published_at
             limit max_events
               for update skip locked
          ), inbox as (
            -- the relay's records of the event's deliveries; another tenant's message, or a broker message the
            -- inbox recorded (first_seen_at), may carry the same id
            delete from public.consumer_inbox i using doomed
             where i.event_id = doomed.id and i.tenant_id = doomed.tenant_id and i.first_seen_at is null
          ), deliveries as (
            delete from public.outbox_deliveries d using doomed where d.event_id = doomed.id
          ), events as (
            delete from public.event_outbox e using doomed where e.id = doomed.id returning e.published_at
          )
          select count(*)::int, max(published_at) into deleted, last_at from events;
          if last_at is not null then
            if k is null then
              ranges := array_append(ranges, null::uuid);
              ats := array_append(ats, last_at);
            else
              ats[k] := last_at;
            end if;
          end if;
          return;
        end if;
        -- partitioned: as the two-argument form (settled rows past the cut-off in the ranges outbox_drop_partitions
        -- could not drop and in the default partitions; in a younger range, only rows settled a width before the
        -- cut-off), each range from its position
        for r in select h.lo, h.events, h.deliveries, h.inbox,
                        case when h.hi <= public.outbox_uuid_at(older_than) then older_than
                             else older_than - (select width from public.outbox_partitioning) end as cut_off
                   from public.outbox_history_ranges() h
                 union all
                 select null::uuid, 'public.event_outbox_default'::regclass, 'public.outbox_deliveries_default'::regclass,
                        'public.consumer_inbox_default'::regclass, older_than loop
          k := array_position(ranges, r.lo);
          -- one probe of the range's settled index first, from its position: most ranges have nothing to delete
          execute format('select exists (select 1 from %s where status in (''published'', ''no_handlers'')
                                              and published_at >= $2 and published_at < $1)', r.events)
            into due using r.cut_off, coalesce(ats[k], '-infinity');
          continue when not due;
          execute format('
            with doomed as (
              select id, tenant_id from %1$s
               where status in (''published'', ''no_handlers'') and published_at >= $3 and published_at < $1
               order by published_at
               limit $2
                 for update skip locked
            ), inbox as (
              delete from %3$s i using doomed
               where i.event_id = doomed.id and i.tenant_id = doomed.tenant_id and i.first_seen_at is null
            ), deliveries as (
              delete from %2$s d using doomed where d.event_id = doomed.id
            ), events as (
              delete from %1$s e using doomed where e.id = doomed.id returning e.published_at
            )
            select count(*)::int, max(published_at) from events', r.events, r.deliveries, r.inbox)
            into n, last_at using r.cut_off, max_events - deleted, coalesce(ats[k], '-infinity');
          deleted := deleted + n;
          if last_at is not null then
            if k is null then
              ranges := array_append(ranges, r.lo);
              ats := array_append(ats, last_at);
            else
              ats[k] := last_at;
            end if;
          end if;
          exit when deleted >= max_events;
        end loop;
        -- the positions of ranges dropped since are of no use
        select coalesce(array_agg(p.lo order by p.i), '{}'), coalesce(array_agg(p.pos order by p.i), '{}')
          into ranges, ats
          from unnest(ranges, ats) with ordinality p(lo, pos, i)
         where p.lo is null or p.lo in (select h.lo from public.outbox_history_ranges() h);
      end $$`);
    await q.query(
      `revoke all on function public.outbox_purge_settled(timestamptz, integer, uuid[], timestamptz[]) from public`,
    );
    await q.query(
      `grant execute on function public.outbox_purge_settled(timestamptz, integer, uuid[], timestamptz[]) to outbox_relay`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_purge_settled(timestamptz, integer, uuid[], timestamptz[])`);
  }
}
