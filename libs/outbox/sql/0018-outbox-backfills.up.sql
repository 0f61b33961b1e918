-- nestjs-pg-outbox migration 0018-outbox-backfills (up), recorded from the TypeORM class OutboxBackfills1764500900000. Do not edit.
create table public.outbox_backfills (
        id uuid primary key,
        consumer_name text not null,
        -- null: every tenant the connection sees
        tenant_id uuid,
        since timestamptz,
        event_names text[],
        -- the largest event id when the backfill started: later events fan out to the consumer
        horizon_id uuid,
        position_id uuid,
        created_rows bigint not null default 0,
        chunks integer not null default 0,
        started_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        finished_at timestamptz
      );

create index outbox_backfills_open_idx on public.outbox_backfills (consumer_name) where finished_at is null;

grant select, insert, update on public.outbox_backfills to outbox_relay;
