-- nestjs-pg-outbox migration 0027-outbox-consumer-limits-from (down), recorded from the TypeORM class OutboxConsumerLimitsFrom1764502050000. Do not edit.
alter table public.outbox_consumers drop column if exists limits_from;
