-- nestjs-pg-outbox migration 0007-outbox-relay-maintain (up), recorded from the TypeORM class OutboxRelayMaintain1764435600000. Do not edit.
do $$ begin
        if current_setting('server_version_num')::int >= 170000 then
          execute 'grant maintain on table public.outbox_event_leases to outbox_relay';
        end if;
      end $$;
