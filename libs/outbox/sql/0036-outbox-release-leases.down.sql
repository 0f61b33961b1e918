-- nestjs-pg-outbox migration 0036-outbox-release-leases (down), recorded from the TypeORM class OutboxReleaseLeases1764503800000. Do not edit.
drop function if exists public.outbox_release_leases(uuid[], uuid);
