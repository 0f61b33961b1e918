-- nestjs-pg-outbox migration 0018-outbox-backfills (down), recorded from the TypeORM class OutboxBackfills1764500900000. Do not edit.
drop table if exists public.outbox_backfills;
