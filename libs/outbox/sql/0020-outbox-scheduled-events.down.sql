-- nestjs-pg-outbox migration 0020-outbox-scheduled-events (down), recorded from the TypeORM class OutboxScheduledEvents1764501100000. Do not edit.
drop function if exists public.outbox_promote_scheduled(integer);

update public.event_outbox set status = 'pending', seq = default where status = 'scheduled';

drop index if exists public.event_outbox_scheduled_idx;

alter table public.event_outbox drop constraint event_outbox_status_check,
        add constraint event_outbox_status_check
          check (status in ('pending', 'processing', 'published', 'failed', 'no_handlers'));

alter table public.event_outbox drop column if exists deliver_at;
