-- nestjs-pg-outbox migration 0038-outbox-purge-from-position (down), recorded from the TypeORM class OutboxPurgeFromPosition1764504000000. Do not edit.
drop function if exists public.outbox_purge_settled(timestamptz, integer, uuid[], timestamptz[]);
