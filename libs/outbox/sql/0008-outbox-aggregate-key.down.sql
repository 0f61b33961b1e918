-- nestjs-pg-outbox migration 0008-outbox-aggregate-key (down), recorded from the TypeORM class OutboxAggregateKey1764450000000. Do not edit.
update public.outbox_deliveries d
         set aggregate_key = coalesce(e.aggregate_type, '') || ':' || e.aggregate_id
        from public.event_outbox e
       where e.id = d.event_id and d.aggregate_key is not null;
