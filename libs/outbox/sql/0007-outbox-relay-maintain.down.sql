-- nestjs-pg-outbox migration 0007-outbox-relay-maintain (down), recorded from the TypeORM class OutboxRelayMaintain1764435600000. Do not edit.
do $$ begin
        if current_setting('server_version_num')::int >= 170000 then
          execute 'revoke maintain on table public.outbox_event_leases from outbox_relay';
        end if;
      end $$;
