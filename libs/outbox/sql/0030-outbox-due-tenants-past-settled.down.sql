-- nestjs-pg-outbox migration 0030-outbox-due-tenants-past-settled (down), recorded from the TypeORM class OutboxDueTenantsPastSettled1764502600000. Do not edit.
drop function if exists public.outbox_due_tenants(integer, uuid, uuid[], bigint[], text, timestamptz);
