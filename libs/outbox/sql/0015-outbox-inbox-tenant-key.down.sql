-- nestjs-pg-outbox migration 0015-outbox-inbox-tenant-key (down), recorded from the TypeORM class OutboxInboxTenantKey1764500400000. Do not edit.
delete from public.consumer_inbox i
       using (select ctid, row_number() over (partition by event_id, consumer_name
                                              order by coalesce(first_seen_at, processed_at, last_seen_at) nulls last,
                                                       tenant_id) as n
                from public.consumer_inbox) ranked
       where i.ctid = ranked.ctid and ranked.n > 1;

alter table public.consumer_inbox
        drop constraint consumer_inbox_pkey,
        add constraint consumer_inbox_pkey primary key (event_id, consumer_name);
