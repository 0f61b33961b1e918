-- nestjs-pg-outbox migration 0032-outbox-consumer-key-limits (down), recorded from the TypeORM class OutboxConsumerKeyLimits1764502800000. Do not edit.
drop table if exists public.outbox_consumer_key_starts;

alter table public.outbox_consumers drop column if exists rate_key;
