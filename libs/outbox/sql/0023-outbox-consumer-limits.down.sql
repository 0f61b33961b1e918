-- nestjs-pg-outbox migration 0023-outbox-consumer-limits (down), recorded from the TypeORM class OutboxConsumerLimits1764501700000. Do not edit.
drop function if exists public.outbox_consumer_in_flight(text, uuid);

drop table if exists public.outbox_consumer_limits;

alter table public.outbox_consumers
        drop column if exists concurrency,
        drop column if exists tenant_concurrency,
        drop column if exists rate_limit,
        drop column if exists rate_interval_ms,
        drop column if exists rate_per_tenant;
