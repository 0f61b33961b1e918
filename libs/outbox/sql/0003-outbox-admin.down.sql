-- nestjs-pg-outbox migration 0003-outbox-admin (down), recorded from the TypeORM class OutboxAdmin1764428650000. Do not edit.
drop function if exists public.outbox_oldest_pending_age(interval);
