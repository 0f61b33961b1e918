-- nestjs-pg-outbox migration 0039-outbox-due-tenants-floor (down), recorded from the TypeORM class OutboxDueTenantsFloor1764504100000. Do not edit.
drop function if exists public.outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz, uuid);
