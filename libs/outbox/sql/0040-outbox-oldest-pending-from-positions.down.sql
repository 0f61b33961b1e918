-- nestjs-pg-outbox migration 0040-outbox-oldest-pending-from-positions (down), recorded from the TypeORM class OutboxOldestPendingFromPositions1764504200000. Do not edit.
drop function if exists public.outbox_oldest_pending_age(interval, uuid[], bigint[], bigint[], xid8, text[], text);
