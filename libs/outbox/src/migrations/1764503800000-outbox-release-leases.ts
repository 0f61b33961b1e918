import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_release_leases(event_ids, lease_token)`: deletes the event leases of `event_ids` that `lease_token`
 * still holds, through the lease table's primary key, and returns their event ids. The prepared outcome of a batch
 * of pairs deleted them itself, on a generic plan made with the size of the table then: a page or so (the relay
 * vacuums it), so a sequential scan, kept while a held snapshot left every deleted lease in the table — one scan
 * per batch, growing with the hold (docs/adr/1206-claims-that-start-past-the-settled.md, addendum "The outcome's
 * lease delete"). Sequential scans are off in the function, whatever its plan's statistics (jit too: their
 * disabling cost would compile it). Security invoker: the caller's row-level security applies. Frozen history:
 * literal SQL.
 */
export class OutboxReleaseLeases1764503800000 implements MigrationInterface {
  name = 'OutboxReleaseLeases1764503800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create function public.outbox_release_leases(event_ids uuid[], lease_token uuid) returns setof uuid
      language sql volatile set enable_seqscan = off set jit = off as $$
        delete from public.outbox_event_leases l
         where l.event_id = any(event_ids) and l.lease_token = outbox_release_leases.lease_token
        returning l.event_id
      $$`);
    await q.query(`revoke all on function public.outbox_release_leases(uuid[], uuid) from public`);
    await q.query(`grant execute on function public.outbox_release_leases(uuid[], uuid) to outbox_relay`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`drop function if exists public.outbox_release_leases(uuid[], uuid)`);
  }
}
