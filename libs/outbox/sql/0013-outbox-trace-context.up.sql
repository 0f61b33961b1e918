-- nestjs-pg-outbox migration 0013-outbox-trace-context (up), recorded from the TypeORM class OutboxTraceContext1764500200000. Do not edit.
alter table public.event_outbox add column traceparent text;
