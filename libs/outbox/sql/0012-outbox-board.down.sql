-- nestjs-pg-outbox migration 0012-outbox-board (down), recorded from the TypeORM class OutboxBoard1764500100000. Do not edit.
drop function if exists public.outbox_row_estimate(uuid, text, text);

drop index if exists public.event_outbox_processing_idx;

drop index if exists public.outbox_deliveries_open_idx;

drop function if exists public.outbox_record_activity(uuid[], timestamptz[], text[], integer[], integer[], integer[], integer[]);

drop table if exists public.outbox_activity;

drop table if exists public.outbox_audit;
