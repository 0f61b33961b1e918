import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_lease_fence(expected, recorded)`: raises SQLSTATE `OB001` when a relay's batch recorded fewer outcomes
 * than it claimed. Frozen history: literal SQL.
 *
 * The statement that records in-process outcomes is fenced by the lease token: outcomes whose lease another relay
 * took over are not written. Once it calls this function, a lost lease also aborts the batch transaction, so the
 * handlers' writes of that batch roll back with it — the relay no longer needs to lock what it owns before running
 * handlers (one statement and one round trip less per batch).
 */
export class OutboxLeaseFence1764432000000 implements MigrationInterface {
  name = 'OutboxLeaseFence1764432000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
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
      $$`);
    await q.query(`revoke all on function public.outbox_lease_fence(integer, integer) from public`);
    await q.query(`grant execute on function public.outbox_lease_fence(integer, integer) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_lease_fence(integer, integer)`);
  }
}
