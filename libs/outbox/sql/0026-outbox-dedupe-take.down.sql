-- nestjs-pg-outbox migration 0026-outbox-dedupe-take (down), recorded from the TypeORM class OutboxDedupeTake1764502000000. Do not edit.
drop function if exists public.outbox_dedupe_take(uuid, text, text, uuid, float8);
