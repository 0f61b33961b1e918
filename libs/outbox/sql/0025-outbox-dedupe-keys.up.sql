-- nestjs-pg-outbox migration 0025-outbox-dedupe-keys (up), recorded from the TypeORM class OutboxDedupeKeys1764501900000. Do not edit.
create table public.outbox_dedupe_keys (
        tenant_id uuid not null,
        event_name text not null,
        dedupe_key text not null,
        event_id uuid not null,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        constraint outbox_dedupe_keys_pkey primary key (tenant_id, event_name, dedupe_key)
      );

create index outbox_dedupe_keys_expiry_idx on public.outbox_dedupe_keys (expires_at);

alter table public.outbox_dedupe_keys enable row level security;

create policy outbox_dedupe_keys_tenant_isolation on public.outbox_dedupe_keys
        to outbox_app, outbox_relay
        using (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid)
        with check (tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid);

grant select, insert, update on public.outbox_dedupe_keys to outbox_app;

grant select, insert, update, delete on public.outbox_dedupe_keys to outbox_relay;

alter table public.event_outbox add column dedupe_key text;

create function public.outbox_dedupe_replace(
        replaced_id uuid, new_payload jsonb, new_version integer, new_deliver_at timestamptz default null)
      returns boolean
      language plpgsql volatile security definer set search_path = pg_catalog, public as $$
      begin
        if current_setting('transaction_isolation') <> 'read committed' then
          return false;
        end if;
        perform 1 from public.event_outbox e
         where e.id = replaced_id
           and (e.status = 'scheduled' or (e.status = 'pending' and new_deliver_at is null))
           and (e.tenant_id = coalesce(nullif(current_setting('app.current_tenant_id', true), ''), '00000000-0000-0000-0000-000000000000')::uuid
                or exists (select 1 from pg_roles r
                            where r.rolname = coalesce(nullif(current_setting('role'), 'none'), session_user) and (r.rolsuper or r.rolbypassrls))
                or pg_has_role(coalesce(nullif(current_setting('role'), 'none'), session_user), (select c.relowner from pg_class c
                                            where c.oid = 'public.event_outbox'::regclass), 'MEMBER'))
           for update;
        if not found then
          return false;
        end if;
        if exists (select 1 from public.outbox_event_leases l where l.event_id = replaced_id) then
          return false;
        end if;
        update public.event_outbox
           set payload = new_payload, schema_version = new_version, updated_at = now(),
               deliver_at = coalesce(new_deliver_at, deliver_at)
         where id = replaced_id;
        return true;
      end
      $$;

revoke all on function public.outbox_dedupe_replace(uuid, jsonb, integer, timestamptz) from public;

grant execute on function public.outbox_dedupe_replace(uuid, jsonb, integer, timestamptz) to outbox_app, outbox_relay;

create function public.outbox_purge_dedupe_keys(max_keys integer) returns integer
      language sql volatile security definer set search_path = pg_catalog, public as $$
        with doomed as (
          select tenant_id, event_name, dedupe_key from public.outbox_dedupe_keys
           where expires_at <= now()
           order by expires_at
           limit max_keys
             for update skip locked
        ), deleted as (
          delete from public.outbox_dedupe_keys k using doomed
           where k.tenant_id = doomed.tenant_id and k.event_name = doomed.event_name
             and k.dedupe_key = doomed.dedupe_key and k.expires_at <= now()
          returning 1
        )
        select count(*)::int from deleted
      $$;

revoke all on function public.outbox_purge_dedupe_keys(integer) from public;

grant execute on function public.outbox_purge_dedupe_keys(integer) to outbox_relay;
