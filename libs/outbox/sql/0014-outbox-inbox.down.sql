-- nestjs-pg-outbox migration 0014-outbox-inbox (down), recorded from the TypeORM class OutboxInbox1764500300000. Do not edit.
revoke select, insert, update on public.consumer_inbox from outbox_app;

drop index if exists public.consumer_inbox_unsettled_idx;

delete from public.consumer_inbox where status <> 'processed';

alter table public.consumer_inbox
        drop constraint if exists consumer_inbox_status_check,
        drop column if exists status,
        drop column if exists attempts,
        drop column if exists message_id,
        drop column if exists last_error,
        drop column if exists first_seen_at,
        drop column if exists last_seen_at,
        alter column processed_at set not null;
