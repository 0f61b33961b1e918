-- nestjs-pg-outbox migration 0002-outbox-tenancy (down), recorded from the TypeORM class OutboxTenancy1764428600000. Do not edit.
drop function if exists public.outbox_purge_settled(timestamptz, integer);

drop policy if exists event_outbox_tenant_isolation on public.event_outbox;

alter table public.event_outbox disable row level security;

drop policy if exists outbox_deliveries_tenant_isolation on public.outbox_deliveries;

alter table public.outbox_deliveries disable row level security;

drop policy if exists consumer_inbox_tenant_isolation on public.consumer_inbox;

alter table public.consumer_inbox disable row level security;

revoke all on public.event_outbox, public.outbox_deliveries, public.consumer_inbox from outbox_app, outbox_relay;

drop table if exists public.outbox_consumer_instances;

drop table if exists public.outbox_consumers;

revoke usage on schema public from outbox_app, outbox_relay;
