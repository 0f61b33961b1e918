-- nestjs-pg-outbox migration 0042-outbox-ordered-open-index (down), recorded from the TypeORM class OutboxOrderedOpenIndex1764504700000. Do not edit.
drop index if exists public.outbox_deliveries_ordered_open_idx;
