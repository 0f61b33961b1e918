-- nestjs-pg-outbox migration 0006-outbox-lease-fence (down), recorded from the TypeORM class OutboxLeaseFence1764432000000. Do not edit.
drop function if exists public.outbox_lease_fence(integer, integer);
