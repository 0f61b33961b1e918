-- nestjs-pg-outbox migration 0008-outbox-aggregate-key (up), recorded from the TypeORM class OutboxAggregateKey1764450000000. Do not edit.
update public.outbox_deliveries d
         set aggregate_key = json_build_array(e.aggregate_type, e.aggregate_id)::text
        from public.event_outbox e
       where e.id = d.event_id and d.aggregate_key is not null;
