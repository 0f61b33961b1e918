import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The batch seal: only the relay commits a batch transaction. Frozen history: literal SQL.
 *
 * In-process handlers run in the relay's batch transaction, each in a savepoint. A handler that sends `COMMIT` on
 * the batch's connection past `context.manager` (through the pg client under its query runner) committed the
 * writes of the handlers before it without their outcomes; the batch then ran again and those writes landed
 * twice. Now the relay's first statement of a batch transaction in which handlers write inserts a row here,
 * keyed by the batch's lease token, and its closing round trip deletes it before its own `COMMIT`. The row's
 * deferred constraint trigger fires at commit: if the row is still there, the commit was not the relay's, and
 * it fails — the whole transaction rolls back, every handler's writes with it. The relay's own check of every
 * deferred constraint (`set constraints all immediate` inside a savepoint it rolls back, to find the handler
 * that violated one) says so in a transaction-local setting; a handler's `set constraints all immediate` is
 * refused like a commit (it would check, and spend, the relay's seal).
 *
 * UNLOGGED, and no row ever commits: each is deleted, or rolled back, in the transaction that inserted it.
 */
export class OutboxBatchSeal1764500700000 implements MigrationInterface {
  name = 'OutboxBatchSeal1764500700000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`create unlogged table public.outbox_batch_seals (lease_token uuid primary key)`);
    await q.query(`
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
      $$`);
    await q.query(`revoke all on function public.outbox_batch_seal() from public`);
    await q.query(`
      create constraint trigger outbox_batch_seal after insert on public.outbox_batch_seals
        deferrable initially deferred for each row execute function public.outbox_batch_seal()`);
    await q.query(`grant select, insert, delete on public.outbox_batch_seals to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop table if exists public.outbox_batch_seals`);
    await q.query(`drop function if exists public.outbox_batch_seal()`);
  }
}
