-- nestjs-pg-outbox migration 0036-outbox-release-leases (up), recorded from the TypeORM class OutboxReleaseLeases1764503800000. Do not edit.
create function public.outbox_release_leases(event_ids uuid[], lease_token uuid) returns setof uuid
      language sql volatile set enable_seqscan = off set jit = off as $$
        delete from public.outbox_event_leases l
         where l.event_id = any(event_ids) and l.lease_token = outbox_release_leases.lease_token
        returning l.event_id
      $$;

revoke all on function public.outbox_release_leases(uuid[], uuid) from public;

grant execute on function public.outbox_release_leases(uuid[], uuid) to outbox_relay;
