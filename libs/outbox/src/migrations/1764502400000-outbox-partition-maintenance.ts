import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The functions of the partitioned layout (opt-in; docs/partitioning.md, docs/adr/1207-partitioned-history.md).
 * Every database gets them; they do nothing until `npx nestjs-pg-outbox sql --partitioned` converts the tables
 * (the row of `outbox_partitioning` says so). Frozen history: literal SQL.
 *
 * One file, on purpose: a migration is one released unit, applied and reverted whole and copied verbatim into
 * sql/0028 (`npm run sql:lib`); its SQL is frozen once released, so it cannot share text with the running code or
 * with other migrations. Split by function, the files would still run as this one class in this order.
 *
 * - `outbox_partitioning`: one row once a conversion is prepared: the width of a range, how many ranges are made
 *   ahead, and the window of ranges that the default partitions' check constraint `outbox_window` excludes.
 * - `outbox_uuid_at(t)`: the smallest UUIDv7 of the millisecond of `t` (ADR 0607): a range bound;
 *   `outbox_uuid_time(u)` the other way.
 * - `outbox_partition_ranges(parent)`: the range partitions of a table, with their bounds;
 *   `outbox_history_ranges()` the three tables' partitions of each range; `outbox_create_range` makes one.
 * - `outbox_partition_prepare(width, ahead, start_at)` and `outbox_partition_tables()`: the two steps of the
 *   conversion, run by the tables' owner (the CLI prints them with the statements that go between them).
 * - `outbox_make_partitions()`: the relay's maintenance, makes the ranges `ahead` of now (widening the window
 *   first when it must, one step per call: it returns -1 when it wants to be called again).
 * - `outbox_drop_partitions(older_than)`: retention, drops the oldest range past `older_than` in which everything
 *   is settled (1), or finds none (0), or could not take the lock in time (-1).
 * - `outbox_range_settled(…)`: whether nothing is left to do in a range (a probe of a partial index per check).
 * - `outbox_purge_settled`: in the partitioned layout, row deletes only in ranges past the cut-off that could not
 *   be dropped and in the default partitions (in a younger range, only rows settled a width before the cut-off,
 *   which no UUIDv7 id made at enqueue can be); unchanged otherwise. Down restores
 *   OutboxPurgeRelayInbox1764500800000's, and refuses on a converted database.
 *
 * The SECURITY DEFINER functions run as the migrating role, which owns the tables (creating and dropping
 * partitions needs it); `outbox_relay` may execute the maintenance ones.
 */
export class OutboxPartitionMaintenance1764502400000 implements MigrationInterface {
  name = 'OutboxPartitionMaintenance1764502400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.outbox_partitioning (
        one boolean primary key default true check (one),
        width interval not null,
        ahead integer not null,
        window_start timestamptz not null,
        window_end timestamptz not null,
        next_window_start timestamptz,
        next_window_end timestamptz,
        converted_at timestamptz
      )`);
    await q.query(`
      create function public.outbox_uuid_at(t timestamptz) returns uuid
      language sql immutable strict parallel safe as $$
        select (lpad(to_hex(floor(extract(epoch from t) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
      $$`);
    await q.query(`
      create function public.outbox_partition_ranges(parent regclass)
      returns table (part regclass, lo uuid, hi uuid)
      language sql stable set search_path = pg_catalog, public as $$
        select c.oid::regclass,
               substring(x.bound from 'FROM \\(''([0-9a-f-]+)''\\)')::uuid,
               substring(x.bound from 'TO \\(''([0-9a-f-]+)''\\)')::uuid
          from pg_inherits i join pg_class c on c.oid = i.inhrelid,
               lateral (select pg_get_expr(c.relpartbound, c.oid) as bound offset 0) x
         where i.inhparent = parent and x.bound <> 'DEFAULT'
         order by 2
      $$`);
    await q.query(`
      create function public.outbox_uuid_time(u uuid) returns timestamptz
      language sql immutable strict parallel safe as $$
        select to_timestamp(('x' || lpad(substr(replace(u::text, '-', ''), 1, 12), 16, '0'))::bit(64)::bigint / 1000.0)
      $$`);
    await q.query(`
      create function public.outbox_create_range(parent regclass, lo timestamptz, width interval) returns void
      language plpgsql volatile set search_path = pg_catalog, public as $$
      begin
        execute format('create table %I.%I partition of %s for values from (%L) to (%L)',
                       (select relnamespace::regnamespace::text from pg_class where oid = parent),
                       (select relname from pg_class where oid = parent) || '_p' || to_char(lo at time zone 'UTC', 'YYYYMMDD"t"HH24MI'),
                       parent, public.outbox_uuid_at(lo), public.outbox_uuid_at(lo + width));
      end $$`);
    await q.query(`revoke all on function public.outbox_create_range(regclass, timestamptz, interval) from public`);
    await q.query(`
      create function public.outbox_history_ranges()
      returns table (events regclass, deliveries regclass, inbox regclass, lo uuid, hi uuid)
      language sql stable set search_path = pg_catalog, public as $$
        with e as materialized (select * from public.outbox_partition_ranges('public.event_outbox')),
             d as materialized (select * from public.outbox_partition_ranges('public.outbox_deliveries')),
             i as materialized (select * from public.outbox_partition_ranges('public.consumer_inbox'))
        select e.part, d.part, i.part, e.lo, e.hi
          from e join d on d.lo = e.lo and d.hi = e.hi join i on i.lo = e.lo and i.hi = e.hi
         order by e.lo
      $$`);
    await q.query(`
      create function public.outbox_partition_prepare(width interval, ahead integer, start_at timestamptz default null)
      returns text
      language plpgsql volatile set search_path = pg_catalog, public as $$
      declare
        b0 timestamptz;
        b_end timestamptz;
        t record;
      begin
        if width is null or width < interval '1 hour' or width > interval '31 days' or extract(month from width) <> 0 then
          raise exception 'outbox_partition_prepare: width must be from 1 hour to 31 days (in hours or days), got %', width
            using errcode = '22023';
        end if;
        if ahead is null or ahead < 1 or ahead > 1000 then
          raise exception 'outbox_partition_prepare: ahead must be from 1 to 1000 ranges, got %', ahead using errcode = '22023';
        end if;
        if (select relkind from pg_class where oid = 'public.event_outbox'::regclass) = 'p' then
          raise exception 'outbox_partition_prepare: event_outbox is partitioned already' using errcode = '55000';
        end if;
        if start_at is not null and start_at < now() + interval '1 day'
           and (exists (select 1 from public.event_outbox) or exists (select 1 from public.outbox_deliveries)
                or exists (select 1 from public.consumer_inbox)) then
          raise exception 'outbox_partition_prepare: start_at % is less than a day ahead and the tables hold rows: new rows of the app would fall in the first ranges before the conversion; leave start_at out', start_at
            using errcode = '22023';
        end if;
        -- by default the first range starts at the first boundary a day ahead: rows the app inserts until the
        -- conversion stay out of the window (its check constraint would refuse them)
        b0 := date_bin(width, coalesce(start_at, now() + interval '1 day'), timestamptz '2000-01-01 00:00:00+00');
        if start_at is null then b0 := b0 + width; end if;
        b_end := date_bin(width, greatest(b0, now()) + width * ahead, timestamptz '2000-01-01 00:00:00+00') + width;
        delete from public.outbox_partitioning where converted_at is null;
        insert into public.outbox_partitioning (width, ahead, window_start, window_end) values (width, ahead, b0, b_end);
        for t in select * from (values ('public.event_outbox'::regclass, 'id'),
                                       ('public.outbox_deliveries'::regclass, 'event_id'),
                                       ('public.consumer_inbox'::regclass, 'event_id')) v(rel, key) loop
          execute format('alter table %s drop constraint if exists outbox_window', t.rel);
          execute format('alter table %s add constraint outbox_window check (not (%I >= %L::uuid and %I < %L::uuid)) not valid',
                         t.rel, t.key, public.outbox_uuid_at(b0), t.key, public.outbox_uuid_at(b_end));
        end loop;
        return format('ranges of %s from %s to %s: now validate outbox_window on the three tables, then run outbox_partition_tables()', width, b0, b_end);
      end $$`);
    await q.query(`revoke all on function public.outbox_partition_prepare(interval, integer, timestamptz) from public`);
    await q.query(`
      create function public.outbox_partition_tables() returns text
      language plpgsql volatile set search_path = pg_catalog, public as $$
      declare
        s public.outbox_partitioning;
        t record;
        d record;
        parent text;
        legacy regclass;
        defs text[];
        next_value bigint;
        seq regclass;
        lo timestamptz;
      begin
        select * into s from public.outbox_partitioning;
        if not found then
          raise exception 'outbox_partition_tables: no conversion prepared; run outbox_partition_prepare(width, ahead) first'
            using errcode = '55000';
        end if;
        if s.converted_at is not null then
          raise exception 'outbox_partition_tables: the tables were partitioned at %', s.converted_at using errcode = '55000';
        end if;
        for t in select * from (values (1, 'public.event_outbox'::regclass, 'id', 'seq'),
                                       (2, 'public.outbox_deliveries'::regclass, 'event_id', 'id'),
                                       (3, 'public.consumer_inbox'::regclass, 'event_id', null)) v(n, rel, key, ident)
                  order by n loop
          execute format('lock table %s in access exclusive mode', t.rel);
          if not exists (select 1 from pg_constraint where conrelid = t.rel and conname = 'outbox_window' and convalidated) then
            raise exception 'outbox_partition_tables: %.outbox_window is missing or not validated; run: alter table % validate constraint outbox_window', t.rel, t.rel
              using errcode = '55000';
          end if;
        end loop;
        if not exists (select 1 from pg_indexes where tablename = 'outbox_deliveries' and indexname = 'outbox_deliveries_id_event_key'
                        and schemaname = (select relnamespace::regnamespace::text from pg_class where oid = 'public.outbox_deliveries'::regclass)) then
          raise exception 'outbox_partition_tables: index outbox_deliveries_id_event_key is missing; create it first (npx nestjs-pg-outbox sql --partitioned prints it)'
            using errcode = '55000';
        end if;
        -- the deliveries' key must hold the partition key: (id) becomes (id, event_id), built concurrently before
        alter table public.outbox_deliveries drop constraint outbox_deliveries_pkey;
        alter table public.outbox_deliveries add constraint outbox_deliveries_pkey primary key using index outbox_deliveries_id_event_key;
        for t in select * from (values (1, 'public.event_outbox'::regclass, 'id', 'seq'),
                                       (2, 'public.outbox_deliveries'::regclass, 'event_id', 'id'),
                                       (3, 'public.consumer_inbox'::regclass, 'event_id', null)) v(n, rel, key, ident)
                  order by n loop
          legacy := t.rel;
          parent := format('%I.%I', (select relnamespace::regnamespace::text from pg_class where oid = legacy),
                           (select relname from pg_class where oid = legacy));
          -- what the new parent takes over: key constraints, plain indexes, policies, grants, owner
          defs := array(
            select format('alter table %s add constraint %I %s', parent, c.conname, pg_get_constraintdef(c.oid))
              from pg_constraint c where c.conrelid = legacy and c.contype in ('p', 'u')
            union all
            select pg_get_indexdef(i.indexrelid)
              from pg_index i where i.indrelid = legacy
               and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)
            union all
            select format('create policy %I on %s as %s for %s to %s%s%s', p.polname, parent,
                          case when p.polpermissive then 'permissive' else 'restrictive' end,
                          case p.polcmd when 'r' then 'select' when 'a' then 'insert' when 'w' then 'update'
                                        when 'd' then 'delete' else 'all' end,
                          case when p.polroles = '{0}' then 'PUBLIC'
                               else (select string_agg(quote_ident(rolname), ', ') from pg_roles where oid = any(p.polroles)) end,
                          coalesce(' using (' || pg_get_expr(p.polqual, p.polrelid) || ')', ''),
                          coalesce(' with check (' || pg_get_expr(p.polwithcheck, p.polrelid) || ')', ''))
              from pg_policy p where p.polrelid = legacy
            union all
            select format('grant %s on %s to %s', a.privilege_type, parent,
                          case when a.grantee = 0 then 'PUBLIC' else quote_ident(a.grantee::regrole::text) end)
              from pg_class c, aclexplode(c.relacl) a where c.oid = legacy and a.grantee <> c.relowner);
          -- the old table's names go to the parent: the old indexes and the table get a _default suffix
          for d in select i.indexrelid::regclass as idx, c.relname from pg_index i join pg_class c on c.oid = i.indexrelid
                    where i.indrelid = legacy loop
            execute format('alter index %s rename to %I', d.idx, left(d.relname, 55) || '_default');
          end loop;
          next_value := null;
          if t.ident is not null then
            seq := pg_get_serial_sequence(legacy::text, t.ident)::regclass;
            execute format('select case when is_called then last_value + 1 else last_value end from %s', seq) into next_value;
            execute format('alter table %s alter column %I drop identity', legacy, t.ident);
          end if;
          execute format('alter table %s rename to %I', legacy, (select relname from pg_class where oid = legacy) || '_default');
          execute format('create table %s (like %s including defaults including constraints) partition by range (%I)',
                         parent, legacy, t.key);
          execute format('alter table %s drop constraint outbox_window', parent);
          if t.ident is not null then
            execute format('alter table %s alter column %I add generated always as identity (start with %s)',
                           parent, t.ident, next_value);
          end if;
          if (select relrowsecurity from pg_class where oid = legacy) then
            execute format('alter table %s enable row level security', parent);
          end if;
          if (select relforcerowsecurity from pg_class where oid = legacy) then
            execute format('alter table %s force row level security', parent);
          end if;
          execute format('alter table %s owner to %I', parent, (select relowner::regrole::text from pg_class where oid = legacy));
          for i in 1 .. coalesce(array_length(defs, 1), 0) loop
            execute defs[i];
          end loop;
          lo := s.window_start;
          while lo < s.window_end loop
            perform public.outbox_create_range(parent::regclass, lo, s.width);
            lo := lo + s.width;
          end loop;
          -- no scan: outbox_window (validated) proves the old rows are in none of the ranges
          execute format('alter table %s attach partition %s default', parent, legacy);
        end loop;
        update public.outbox_partitioning set converted_at = now();
        return format('partitioned by ranges of %s from %s to %s; the old tables are the default partitions', s.width, s.window_start, s.window_end);
      end $$`);
    await q.query(`revoke all on function public.outbox_partition_tables() from public`);
    await q.query(`
      create function public.outbox_make_partitions() returns integer
      language plpgsql volatile security definer set search_path = pg_catalog, public set lock_timeout = '500ms' as $$
      declare
        s public.outbox_partitioning;
        t record;
        lo timestamptz;
        needed timestamptz;
        made integer := 0;
        hit uuid;
      begin
        select * into s from public.outbox_partitioning where converted_at is not null for update;
        if not found then return 0; end if;
        needed := date_bin(s.width, now() + s.width * s.ahead, timestamptz '2000-01-01 00:00:00+00') + s.width;
        if s.next_window_end is not null then
          -- step 2 of widening the window: check the default partitions (reads them, blocks no write), then swap
          begin
            for t in select * from (values ('public.event_outbox'::regclass), ('public.outbox_deliveries'::regclass),
                                           ('public.consumer_inbox'::regclass)) v(rel) loop
              execute format('alter table %s_default validate constraint outbox_window_next', t.rel);
              execute format('alter table %s_default drop constraint outbox_window', t.rel);
              execute format('alter table %s_default rename constraint outbox_window_next to outbox_window', t.rel);
            end loop;
          exception when check_violation then
            -- a row came in meanwhile: step 1 again, past it
            for t in select * from (values ('public.event_outbox'::regclass), ('public.outbox_deliveries'::regclass),
                                           ('public.consumer_inbox'::regclass)) v(rel) loop
              execute format('alter table %s_default drop constraint if exists outbox_window_next', t.rel);
            end loop;
            update public.outbox_partitioning set next_window_start = null, next_window_end = null;
            return -1;
          end;
          update public.outbox_partitioning
             set window_start = next_window_start, window_end = next_window_end, next_window_start = null, next_window_end = null;
          return -1;
        end if;
        if s.window_end < needed then
          -- step 1: the next window, not valid yet (a short lock of the default partitions). It starts where the
          -- last one ended or, when the maintenance fell behind and rows of the ranges not made went to the
          -- default partition, at the first boundary past now (those rows stay in the default partition)
          lo := case when s.window_end > now() + interval '5 minutes' then s.window_end
                     else date_bin(s.width, now() + interval '5 minutes', timestamptz '2000-01-01 00:00:00+00') + s.width end;
          needed := date_bin(s.width, now() + s.width * s.ahead * 2, timestamptz '2000-01-01 00:00:00+00') + s.width;
          -- a row of the default partition in the next window (an id that is not UUIDv7) moves its start past it:
          -- one probe of an index that leads with the key
          for t in select * from (values ('public.event_outbox'::regclass, 'id'),
                                         ('public.outbox_deliveries'::regclass, 'event_id'),
                                         ('public.consumer_inbox'::regclass, 'event_id')) v(rel, key) loop
            execute format('select %I from %s_default where %I >= $1 and %I < $2 order by %I desc limit 1', t.key, t.rel, t.key, t.key, t.key)
              into hit using public.outbox_uuid_at(lo), public.outbox_uuid_at(needed);
            if hit is not null then
              lo := date_bin(s.width, public.outbox_uuid_time(hit), timestamptz '2000-01-01 00:00:00+00') + s.width;
              needed := greatest(needed, lo + s.width * s.ahead);
            end if;
          end loop;
          for t in select * from (values ('public.event_outbox'::regclass, 'id'),
                                         ('public.outbox_deliveries'::regclass, 'event_id'),
                                         ('public.consumer_inbox'::regclass, 'event_id')) v(rel, key) loop
            execute format('alter table %s_default drop constraint if exists outbox_window_next', t.rel);
            execute format('alter table %s_default add constraint outbox_window_next check (not (%I >= %L::uuid and %I < %L::uuid)) not valid',
                           t.rel, t.key, public.outbox_uuid_at(lo), t.key, public.outbox_uuid_at(needed));
          end loop;
          update public.outbox_partitioning set next_window_start = lo, next_window_end = needed;
          return -1;
        end if;
        lo := greatest(s.window_start,
                       public.outbox_uuid_time((select r.hi from public.outbox_partition_ranges('public.event_outbox') r order by r.hi desc limit 1)));
        while lo < s.window_end loop
          perform public.outbox_create_range('public.event_outbox', lo, s.width);
          perform public.outbox_create_range('public.outbox_deliveries', lo, s.width);
          perform public.outbox_create_range('public.consumer_inbox', lo, s.width);
          made := made + 1;
          lo := lo + s.width;
        end loop;
        return made;
      end $$`);
    await q.query(`grant execute on function public.outbox_make_partitions() to outbox_relay`);
    await q.query(`
      create function public.outbox_range_settled(events regclass, deliveries regclass, inbox regclass, older_than timestamptz)
      returns boolean
      language plpgsql stable set search_path = pg_catalog, public as $$
      declare
        busy boolean;
      begin
        -- one probe of a partial index each: event_outbox_pending_idx, _processing_idx, _failed_idx, _scheduled_idx,
        -- _settled_idx, outbox_deliveries_open_idx, consumer_inbox_unsettled_idx, consumer_inbox_received_idx
        execute format('select exists (select 1 from %1$s where status = ''pending'')
                            or exists (select 1 from %1$s where status = ''processing'')
                            or exists (select 1 from %1$s where status = ''failed'')
                            or exists (select 1 from %1$s where status = ''scheduled'')
                            or exists (select 1 from %1$s where status in (''published'', ''no_handlers'') and published_at >= $1)
                            or exists (select 1 from %2$s where status <> ''delivered'')
                            or exists (select 1 from %3$s where status <> ''processed'')
                            or exists (select 1 from %3$s where first_seen_at is not null)', events, deliveries, inbox)
          into busy using older_than;
        return not busy;
      end $$`);
    await q.query(`revoke all on function public.outbox_range_settled(regclass, regclass, regclass, timestamptz) from public`);
    await q.query(`
      create function public.outbox_drop_partitions(older_than timestamptz) returns integer
      language plpgsql volatile security definer set search_path = pg_catalog, public set lock_timeout = '500ms' as $$
      declare
        r record;
      begin
        if older_than is null or older_than > now() - interval '1 hour' then
          raise exception 'outbox_drop_partitions: cut-off % is less than an hour ago; events settled within the last hour are never purged', older_than
            using errcode = '22023';
        end if;
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then return 0; end if;
        for r in select h.events, h.deliveries, h.inbox from public.outbox_history_ranges() h
                  where h.hi <= public.outbox_uuid_at(older_than)
                  order by h.lo loop
          -- checked first without a lock (nothing to do: no lock), then again under it
          continue when not public.outbox_range_settled(r.events, r.deliveries, r.inbox, older_than);
          begin
            lock table public.event_outbox, public.outbox_deliveries, public.consumer_inbox in access exclusive mode;
          exception when lock_not_available then
            return -1;
          end;
          continue when not public.outbox_range_settled(r.events, r.deliveries, r.inbox, older_than);
          execute format('drop table %s, %s, %s', r.inbox, r.deliveries, r.events);
          return 1;
        end loop;
        return 0;
      end $$`);
    await q.query(`grant execute on function public.outbox_drop_partitions(timestamptz) to outbox_relay`);
    await q.query(`
      create or replace function public.outbox_purge_settled(older_than timestamptz, max_events integer) returns integer
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        deleted integer;
        total integer := 0;
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
        if not exists (select 1 from public.outbox_partitioning where converted_at is not null) then
          ${UNPARTITIONED_PURGE}
        end if;
        -- partitioned: settled rows past the cut-off in the ranges past it (those outbox_drop_partitions could not
        -- drop) and in the default partitions; in a younger range, only rows settled a width before the cut-off,
        -- which no UUIDv7 id made at enqueue can be (its range would be past the cut-off): such a range is dropped
        -- whole once it is past the cut-off, not deleted row by row before
        for r in select h.events, h.deliveries, h.inbox,
                        case when h.hi <= public.outbox_uuid_at(older_than) then older_than
                             else older_than - (select width from public.outbox_partitioning) end as cut_off
                   from public.outbox_history_ranges() h
                 union all
                 select 'public.event_outbox_default'::regclass, 'public.outbox_deliveries_default'::regclass,
                        'public.consumer_inbox_default'::regclass, older_than loop
          -- one probe of the range's settled index first: most ranges have nothing to delete
          execute format('select exists (select 1 from %s where status in (''published'', ''no_handlers'') and published_at < $1)',
                         r.events) into due using r.cut_off;
          continue when not due;
          execute format('
            with doomed as (
              select id, tenant_id from %1$s
               where status in (''published'', ''no_handlers'') and published_at < $1
               order by published_at
               limit $2
                 for update skip locked
            ), inbox as (
              delete from %3$s i using doomed
               where i.event_id = doomed.id and i.tenant_id = doomed.tenant_id and i.first_seen_at is null
            ), deliveries as (
              delete from %2$s d using doomed where d.event_id = doomed.id
            ), events as (
              delete from %1$s e using doomed where e.id = doomed.id returning 1
            )
            select count(*)::int from events', r.events, r.deliveries, r.inbox)
            into deleted using r.cut_off, max_events - total;
          total := total + deleted;
          exit when total >= max_events;
        end loop;
        return total;
      end $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      do $$ begin
        if exists (select 1 from public.outbox_partitioning where converted_at is not null) then
          raise exception 'the outbox tables are partitioned (outbox_partitioning); this migration cannot be reverted on them'
            using errcode = '55000';
        end if;
      end $$`);
    await q.query(OUTBOX_PURGE_SETTLED_BEFORE);
    await q.query(`drop function if exists public.outbox_drop_partitions(timestamptz)`);
    await q.query(`drop function if exists public.outbox_range_settled(regclass, regclass, regclass, timestamptz)`);
    await q.query(`drop function if exists public.outbox_make_partitions()`);
    await q.query(`drop function if exists public.outbox_partition_tables()`);
    await q.query(`drop function if exists public.outbox_partition_prepare(interval, integer, timestamptz)`);
    await q.query(`drop function if exists public.outbox_create_range(regclass, timestamptz, interval)`);
    await q.query(`drop function if exists public.outbox_history_ranges()`);
    await q.query(`drop function if exists public.outbox_partition_ranges(regclass)`);
    await q.query(`drop function if exists public.outbox_uuid_time(uuid)`);
    await q.query(`drop function if exists public.outbox_uuid_at(timestamptz)`);
    await q.query(`drop table if exists public.outbox_partitioning`);
  }
}

/** The body of `outbox_purge_settled` as OutboxPurgeRelayInbox1764500800000 left it: one batch of row deletes. */
const UNPARTITIONED_PURGE = `with doomed as (
          select id, tenant_id from public.event_outbox
           where status in ('published', 'no_handlers') and published_at < older_than
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
          delete from public.event_outbox e using doomed where e.id = doomed.id returning 1
        )
        select count(*)::int into deleted from events;
        return deleted;`;

/** `outbox_purge_settled` as OutboxPurgeRelayInbox1764500800000 left it (the down restores it). */
const OUTBOX_PURGE_SETTLED_BEFORE = `
      create or replace function public.outbox_purge_settled(older_than timestamptz, max_events integer) returns integer
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      declare
        deleted integer;
      begin
        if older_than is null or older_than > now() - interval '1 hour' then
          raise exception 'outbox_purge_settled: cut-off % is less than an hour ago; events settled within the last hour are never purged', older_than
            using errcode = '22023';
        end if;
        if max_events is null or max_events < 1 then
          raise exception 'outbox_purge_settled: max_events must be at least 1, got %', max_events using errcode = '22023';
        end if;
        ${UNPARTITIONED_PURGE}
      end $$`;
