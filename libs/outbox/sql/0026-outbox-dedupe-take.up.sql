-- nestjs-pg-outbox migration 0026-outbox-dedupe-take (up), recorded from the TypeORM class OutboxDedupeTake1764502000000. Do not edit.
create function public.outbox_dedupe_take(
        key_tenant_id uuid, key_event_name text, key_value text, new_event_id uuid, window_ms float8)
      returns uuid
      language plpgsql volatile set search_path = pg_catalog, public as $$
      declare
        holder uuid;
      begin
        loop
          select k.event_id into holder from public.outbox_dedupe_keys k
           where k.tenant_id = key_tenant_id and k.event_name = key_event_name and k.dedupe_key = key_value
             and k.expires_at > now();
          if found then
            return holder;
          end if;
          insert into public.outbox_dedupe_keys as k (tenant_id, event_name, dedupe_key, event_id, expires_at)
          values (key_tenant_id, key_event_name, key_value, new_event_id,
                  now() + window_ms * interval '1 millisecond')
          on conflict (tenant_id, event_name, dedupe_key) do nothing
          returning k.event_id into holder;
          if found then
            return holder;
          end if;
          update public.outbox_dedupe_keys k
             set event_id = new_event_id, created_at = now(),
                 expires_at = now() + window_ms * interval '1 millisecond'
           where k.tenant_id = key_tenant_id and k.event_name = key_event_name and k.dedupe_key = key_value
             and k.expires_at <= now()
          returning k.event_id into holder;
          if found then
            return holder;
          end if;
        end loop;
      end
      $$;

revoke all on function public.outbox_dedupe_take(uuid, text, text, uuid, float8) from public;

grant execute on function public.outbox_dedupe_take(uuid, text, text, uuid, float8) to outbox_app, outbox_relay;
