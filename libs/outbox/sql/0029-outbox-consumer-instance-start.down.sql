-- nestjs-pg-outbox migration 0029-outbox-consumer-instance-start (down), recorded from the TypeORM class OutboxConsumerInstanceStart1764502500000. Do not edit.
alter table public.outbox_consumer_instances drop column if exists started_at;
