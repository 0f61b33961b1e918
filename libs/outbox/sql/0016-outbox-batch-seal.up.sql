-- nestjs-pg-outbox migration 0016-outbox-batch-seal (up), recorded from the TypeORM class OutboxBatchSeal1764500700000. Do not edit.
create unlogged table public.outbox_batch_seals (lease_token uuid primary key);

create function public.outbox_batch_seal() returns trigger
        language plpgsql security definer set search_path = pg_catalog, public as $$
      begin
        if current_setting('outbox.checking_constraints', true) = 'on' then
          return null;
        end if;
        if exists (select 1 from public.outbox_batch_seals where lease_token = new.lease_token) then
          raise exception 'outbox: a handler committed the batch transaction (or checked all its deferred constraints) behind the relay; the transaction is rolled back'
            using errcode = 'OB004',
                  hint = 'the relay commits the batch transaction with the outcomes: use a nested transaction (savepoint), and name your own constraints in set constraints';
        end if;
        return null;
      end
      $$;

revoke all on function public.outbox_batch_seal() from public;

create constraint trigger outbox_batch_seal after insert on public.outbox_batch_seals
        deferrable initially deferred for each row execute function public.outbox_batch_seal();

grant select, insert, delete on public.outbox_batch_seals to outbox_relay;
