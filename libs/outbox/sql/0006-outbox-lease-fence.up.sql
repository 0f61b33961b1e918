-- nestjs-pg-outbox migration 0006-outbox-lease-fence (up), recorded from the TypeORM class OutboxLeaseFence1764432000000. Do not edit.
create function public.outbox_lease_fence(expected integer, recorded integer) returns integer
        language plpgsql as $$
      begin
        if recorded < expected then
          raise exception 'outbox: % of % claimed outcomes lost their lease to another relay; the batch is rolled back',
            expected - recorded, expected
            using errcode = 'OB001';
        end if;
        return recorded;
      end
      $$;

revoke all on function public.outbox_lease_fence(integer, integer) from public;

grant execute on function public.outbox_lease_fence(integer, integer) to outbox_relay;
