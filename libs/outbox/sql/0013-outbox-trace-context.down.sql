-- nestjs-pg-outbox migration 0013-outbox-trace-context (down), recorded from the TypeORM class OutboxTraceContext1764500200000. Do not edit.
alter table public.event_outbox drop column if exists traceparent;
