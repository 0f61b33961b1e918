import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `consumer_inbox` keyed by tenant as well: its primary key becomes (`event_id`, `consumer_name`, `tenant_id`).
 * Keyed by message and consumer alone, one tenant's message took another tenant's message with the same id for a
 * duplicate (acknowledged, its handler never run), and on a role under row-level security the second tenant's
 * record collided with a row it cannot see and failed at every delivery. Frozen history: literal SQL.
 *
 * - Every row already names its tenant (`tenant_id` is not null since the first migration: the event's tenant
 *   for the relay's rows, the message's for the inbox's, `SINGLE_TENANT_ID` without tenancy), and the new key
 *   holds the old one's columns and more: no row is rewritten, none can collide.
 * - `event_id` stays first: the purge and the admin reads find a message's rows by it.
 * - The unique index is built first (`if not exists`: an operator may have built it beforehand with
 *   `create unique index concurrently`, see docs/upgrading.md), then swapped in for the old key in one
 *   `alter table`, which takes its exclusive lock only for the swap. Building it here holds writes to
 *   `consumer_inbox` (not reads) until the migration commits.
 */
export class OutboxInboxTenantKey1764500400000 implements MigrationInterface {
  name = 'OutboxInboxTenantKey1764500400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `create unique index if not exists consumer_inbox_tenant_key on public.consumer_inbox (event_id, consumer_name, tenant_id)`,
    );
    await q.query(`
      alter table public.consumer_inbox
        drop constraint consumer_inbox_pkey,
        add constraint consumer_inbox_pkey primary key using index consumer_inbox_tenant_key`);
  }

  async down(q: QueryRunner): Promise<void> {
    // the rows the earlier key cannot hold: of the tenants that recorded one message for one consumer, the row
    // seen first stays (the one that earlier key kept)
    await q.query(`
      delete from public.consumer_inbox i
       using (select ctid, row_number() over (partition by event_id, consumer_name
                                              order by coalesce(first_seen_at, processed_at, last_seen_at) nulls last,
                                                       tenant_id) as n
                from public.consumer_inbox) ranked
       where i.ctid = ranked.ctid and ranked.n > 1`);
    await q.query(`
      alter table public.consumer_inbox
        drop constraint consumer_inbox_pkey,
        add constraint consumer_inbox_pkey primary key (event_id, consumer_name)`);
  }
}
