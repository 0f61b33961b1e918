-- nestjs-pg-outbox migration 0015-outbox-inbox-tenant-key (up), recorded from the TypeORM class OutboxInboxTenantKey1764500400000. Do not edit.
create unique index if not exists consumer_inbox_tenant_key on public.consumer_inbox (event_id, consumer_name, tenant_id);

alter table public.consumer_inbox
        drop constraint consumer_inbox_pkey,
        add constraint consumer_inbox_pkey primary key using index consumer_inbox_tenant_key;
