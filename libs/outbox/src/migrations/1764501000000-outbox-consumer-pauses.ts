import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Pauses of consumers (issue 36, docs/flow-control.md): one row per paused (consumer, tenant) pair, `tenant_id`
 * null for every tenant. While a row names a pair, no claim hands its deliveries out: the fan-out still writes
 * them (pending, no attempt), the due claim passes them by, and `outbox_due_tenants` does not list a tenant for
 * them, so a tenant whose only due work is paused costs the relay nothing. Deleting the row resumes the pair.
 * One row per pair: pausing takes the admin lock of the pair's tenant (of the nil tenant for every tenant).
 * See docs/adr/1101-consumer-pauses-in-the-database.md. Not tenant-scoped by row-level security: a row names a
 * consumer and a tenant, no event data. Frozen history: literal SQL.
 */
export class OutboxConsumerPauses1764501000000 implements MigrationInterface {
  name = 'OutboxConsumerPauses1764501000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      create table public.outbox_consumer_pauses (
        consumer_name text not null,
        -- null: every tenant
        tenant_id uuid,
        paused_at timestamptz not null default now(),
        paused_by text,
        reason text
      )`);
    await q.query(
      `create index outbox_consumer_pauses_pair_idx on public.outbox_consumer_pauses (consumer_name, tenant_id)`,
    );
    await q.query(`grant select, insert, update, delete on public.outbox_consumer_pauses to outbox_relay`);
    await q.query(dueTenantsFunction(PASSES_PAUSED));
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(dueTenantsFunction(''));
    await q.query(`drop table if exists public.outbox_consumer_pauses`);
  }
}

/** A due delivery `d` whose (consumer, tenant) pair is not paused. */
const PASSES_PAUSED = `
                   and not exists (select 1 from public.outbox_consumer_pauses x
                                    where x.consumer_name = d.consumer_name
                                      and (x.tenant_id is null or x.tenant_id = d.tenant_id))`;

/**
 * `outbox_due_tenants` as migration OutboxEventLeases1764428800000 left it, with `notPaused` added to the scans
 * of due deliveries (empty: that version itself, for down).
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
