-- nestjs-pg-outbox migration 0032-outbox-consumer-key-limits (up), recorded from the TypeORM class OutboxConsumerKeyLimits1764502800000. Do not edit.
alter table public.outbox_consumers add column rate_key text;

create table public.outbox_consumer_key_starts (
        consumer_name text not null,
        tenant_id uuid not null,
        -- md5 of the key's value
        rate_key uuid not null,
        started_at timestamptz not null,
        n integer not null,
        constraint outbox_consumer_key_starts_pkey primary key (consumer_name, tenant_id, started_at, rate_key)
      );

grant select, insert, update, delete on public.outbox_consumer_key_starts to outbox_relay;
