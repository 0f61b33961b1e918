-- nestjs-pg-outbox migration 0014-outbox-inbox (up), recorded from the TypeORM class OutboxInbox1764500300000. Do not edit.
alter table public.consumer_inbox
        add column status text not null default 'processed',
        add column attempts integer not null default 1,
        add column message_id text,
        add column last_error text,
        add column first_seen_at timestamptz,
        add column last_seen_at timestamptz,
        alter column processed_at drop not null,
        add constraint consumer_inbox_status_check check (status in ('processed', 'retrying', 'dead'));

create index consumer_inbox_unsettled_idx on public.consumer_inbox (tenant_id, consumer_name) where status <> 'processed';

grant select, insert, update on public.consumer_inbox to outbox_app;
