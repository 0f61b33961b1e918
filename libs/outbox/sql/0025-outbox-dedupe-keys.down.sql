-- nestjs-pg-outbox migration 0025-outbox-dedupe-keys (down), recorded from the TypeORM class OutboxDedupeKeys1764501900000. Do not edit.
drop function if exists public.outbox_purge_dedupe_keys(integer);

drop function if exists public.outbox_dedupe_replace(uuid, jsonb, integer, timestamptz);

alter table public.event_outbox drop column if exists dedupe_key;

drop table if exists public.outbox_dedupe_keys;
