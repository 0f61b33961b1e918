-- nestjs-pg-outbox migration 0042-outbox-ordered-open-index (up), recorded from the TypeORM class OutboxOrderedOpenIndex1764504700000. Do not edit.
do $$
      begin
        if (select relkind from pg_class where oid = 'public.outbox_deliveries'::regclass) = 'p' then
          create index if not exists outbox_deliveries_ordered_open_idx on public.outbox_deliveries (tenant_id, event_id)
            where aggregate_key is not null and status <> 'delivered';
        end if;
      end
      $$;
