-- nestjs-pg-outbox migration 0027-outbox-consumer-limits-from (up), recorded from the TypeORM class OutboxConsumerLimitsFrom1764502050000. Do not edit.
alter table public.outbox_consumers add column limits_from timestamptz;
