-- nestjs-pg-outbox migration 0001-outbox-core (down), recorded from the TypeORM class OutboxCore1764428400000. Do not edit.
drop function if exists public.outbox_due_tenants(integer, uuid);

drop table if exists public.consumer_inbox;

drop table if exists public.outbox_deliveries;

drop table if exists public.event_outbox;
