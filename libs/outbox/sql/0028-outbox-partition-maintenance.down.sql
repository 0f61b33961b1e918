-- nestjs-pg-outbox migration 0028-outbox-partition-maintenance (down), recorded from the TypeORM class OutboxPartitionMaintenance1764502400000. Do not edit.
do $$ begin
        if exists (select 1 from public.outbox_partitioning where converted_at is not null) then
          raise exception 'the outbox tables are partitioned (outbox_partitioning); this migration cannot be reverted on them'
            using errcode = '55000';
        end if;
      end $$;

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
        with doomed as (
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
        return deleted;
      end $$;

drop function if exists public.outbox_drop_partitions(timestamptz);

drop function if exists public.outbox_range_settled(regclass, regclass, regclass, timestamptz);

drop function if exists public.outbox_make_partitions();

drop function if exists public.outbox_partition_tables();

drop function if exists public.outbox_partition_prepare(interval, integer, timestamptz);

drop function if exists public.outbox_create_range(regclass, timestamptz, interval);

drop function if exists public.outbox_history_ranges();

drop function if exists public.outbox_partition_ranges(regclass);

drop function if exists public.outbox_uuid_time(uuid);

drop function if exists public.outbox_uuid_at(timestamptz);

drop table if exists public.outbox_partitioning;
