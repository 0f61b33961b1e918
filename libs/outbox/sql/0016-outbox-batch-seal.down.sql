-- nestjs-pg-outbox migration 0016-outbox-batch-seal (down), recorded from the TypeORM class OutboxBatchSeal1764500700000. Do not edit.
drop table if exists public.outbox_batch_seals;

drop function if exists public.outbox_batch_seal();
