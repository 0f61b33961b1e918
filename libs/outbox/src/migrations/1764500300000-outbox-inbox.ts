import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the inbox of broker messages (`OutboxInbox`) needs in `consumer_inbox`. Frozen history: literal SQL.
 *
 * - `status`: `processed` (what every row was so far, and what the relay still writes), `retrying` (the handler
 *   failed, the broker redelivers) or `dead` (dead-lettered after the last delivery allowed).
 * - `attempts`: runs of the handler on the message (the failed ones, and the one that committed), for the
 *   dead-letter decision: counted by the inbox, whatever the broker counts.
 * - `message_id`: the broker's message id as sent, when it is not a UUID (`event_id` then holds a UUID derived
 *   from it); null for outbox events, whose id is `event_id`.
 * - `last_error`, `first_seen_at`, `last_seen_at`: for the operator; null on the rows the relay writes.
 * - `processed_at` becomes nullable: a retrying or dead message is not processed.
 * - `consumer_inbox_unsettled_idx`: the rows not processed, by tenant and consumer, for the admin stats (the
 *   processed rows are every message ever received: stats never count them).
 * New columns are nullable or have constant defaults, so adding them rewrites no row. `outbox_app` may now
 * record inbox rows: an app that receives messages is an app, not a relay.
 */
export class OutboxInbox1764500300000 implements MigrationInterface {
  name = 'OutboxInbox1764500300000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      alter table public.consumer_inbox
        add column status text not null default 'processed',
        add column attempts integer not null default 1,
        add column message_id text,
        add column last_error text,
        add column first_seen_at timestamptz,
        add column last_seen_at timestamptz,
        alter column processed_at drop not null,
        add constraint consumer_inbox_status_check check (status in ('processed', 'retrying', 'dead'))`);
    await q.query(
      `create index consumer_inbox_unsettled_idx on public.consumer_inbox (tenant_id, consumer_name) where status <> 'processed'`,
    );
    await q.query(`grant select, insert, update on public.consumer_inbox to outbox_app`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`revoke select, insert, update on public.consumer_inbox from outbox_app`);
    await q.query(`drop index if exists public.consumer_inbox_unsettled_idx`);
    // the rows the earlier schema cannot hold: messages never processed
    await q.query(`delete from public.consumer_inbox where status <> 'processed'`);
    await q.query(`
      alter table public.consumer_inbox
        drop constraint if exists consumer_inbox_status_check,
        drop column if exists status,
        drop column if exists attempts,
        drop column if exists message_id,
        drop column if exists last_error,
        drop column if exists first_seen_at,
        drop column if exists last_seen_at,
        alter column processed_at set not null`);
  }
}
