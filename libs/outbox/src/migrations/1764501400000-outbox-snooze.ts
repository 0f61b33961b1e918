import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Snooze (issue 36, docs/flow-control.md#snooze, docs/adr/1105-snooze.md). `outbox_deliveries.snoozes` counts the
 * times a delivery was snoozed — put back uncharged at a handler's request (`context.retryAfter`) or a webhook's
 * `429`/`503` with `Retry-After` — so the relay can bound them. `outbox_consumer_pauses.resumes_at` makes a pause
 * expire by itself (null: until resumed, as before): a webhook's `Retry-After` holds its (consumer, tenant) pair
 * until then. The pair index becomes a unique constraint, so the relay writes such a hold with `on conflict` (a pause of every
 * tenant, `tenant_id` null, stays unique by the admin lock as before), and `outbox_due_tenants` ignores expired
 * pauses. Frozen history: literal SQL.
 */
export class OutboxSnooze1764501400000 implements MigrationInterface {
  name = 'OutboxSnooze1764501400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`alter table public.outbox_deliveries add column snoozes integer not null default 0`);
    await q.query(`alter table public.outbox_consumer_pauses add column resumes_at timestamptz`);
    // pauses are written under the admin lock of their tenant: a duplicate is not expected, but would fail the index
    await q.query(`
      delete from public.outbox_consumer_pauses a
       using public.outbox_consumer_pauses b
       where a.consumer_name = b.consumer_name and a.tenant_id = b.tenant_id and a.ctid > b.ctid`);
    await q.query(`
      alter table public.outbox_consumer_pauses
        add constraint outbox_consumer_pauses_pair_key unique (consumer_name, tenant_id)`);
    await q.query(`drop index public.outbox_consumer_pauses_pair_idx`);
    await q.query(dueTenantsFunction(PASSES_PAUSED_UNTIL));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(dueTenantsFunction(PASSES_PAUSED));
    await q.query(
      `create index outbox_consumer_pauses_pair_idx on public.outbox_consumer_pauses (consumer_name, tenant_id)`,
    );
    await q.query(`alter table public.outbox_consumer_pauses drop constraint outbox_consumer_pauses_pair_key`);
    // a pause that was due to expire would last for ever without its column: it ends now
    await q.query(`delete from public.outbox_consumer_pauses where resumes_at is not null`);
    await q.query(`alter table public.outbox_consumer_pauses drop column resumes_at`);
    await q.query(`alter table public.outbox_deliveries drop column snoozes`);
  }
}

/** A due delivery `d` whose (consumer, tenant) pair is not paused (OutboxConsumerPauses1764501000000). */
const PASSES_PAUSED = `
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id))`;

/** The same, with a pause whose `resumes_at` has passed no longer in force. */
const PASSES_PAUSED_UNTIL = `
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id)
                                      and (x.resumes_at is null or x.resumes_at > now()))`;

/**
 * `outbox_due_tenants` as migration OutboxConsumerPauses1764501000000 wrote it, with `notPaused` in the scans of
 * due deliveries (that migration's own test for down).
 */
function dueTenantsFunction(notPaused: string): string {
  return `
    create or replace function public.outbox_due_tenants(max_tenants integer, after_tenant uuid default null)
    returns table (tenant_id uuid, has_new boolean, has_due boolean)
    language plpgsql stable security definer set search_path = pg_catalog, public as $$
    #variable_conflict use_column
    begin
      return query
      with recursive pending_t(tenant_id) as (
        (select tenant_id from public.event_outbox where status = 'pending' order by tenant_id limit 1)
        union all
        select (select e.tenant_id from public.event_outbox e
                 where e.status = 'pending' and e.tenant_id > p.tenant_id order by e.tenant_id limit 1)
          from pending_t p where p.tenant_id is not null
      ), retry_t(tenant_id) as (
        (select d.tenant_id from public.outbox_deliveries d
          where d.status in ('pending', 'failed') and d.next_attempt_at <= now()${notPaused}
          order by d.tenant_id limit 1)
        union all
        select (select d.tenant_id from public.outbox_deliveries d
                 where d.status in ('pending', 'failed') and d.next_attempt_at <= now() and d.tenant_id > r.tenant_id${notPaused}
                 order by d.tenant_id limit 1)
          from retry_t r where r.tenant_id is not null
      ), leased_t(tenant_id) as (
        (select tenant_id from public.outbox_event_leases where lease_expires_at <= now() order by tenant_id limit 1)
        union all
        select (select l.tenant_id from public.outbox_event_leases l
                 where l.lease_expires_at <= now() and l.tenant_id > t.tenant_id
                 order by l.tenant_id limit 1)
          from leased_t t where t.tenant_id is not null
      ), stale_t(tenant_id) as (
        (select d.tenant_id from public.outbox_deliveries d
          where d.status = 'processing' and d.lease_expires_at <= now()${notPaused}
          order by d.tenant_id limit 1)
        union all
        select (select d.tenant_id from public.outbox_deliveries d
                 where d.status = 'processing' and d.lease_expires_at <= now() and d.tenant_id > s.tenant_id${notPaused}
                 order by d.tenant_id limit 1)
          from stale_t s where s.tenant_id is not null
      )
      select t.tenant_id, bool_or(t.is_new), bool_or(not t.is_new) from (
        select p.tenant_id, true as is_new from pending_t p
        union all select l.tenant_id, true from leased_t l
        union all select r.tenant_id, false from retry_t r
        union all select s.tenant_id, false from stale_t s
      ) t where t.tenant_id is not null
      group by t.tenant_id
      order by t.tenant_id <= after_tenant, t.tenant_id
      limit max_tenants;
    end
    $$`;
}
